"""What a collection has to work with, as the platform lists it: its datasets
(the input rows of its experiments) and the models its keys, and the server's
trial keys, can reach."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pier.agents.providers import PROVIDERS
from pier.db import StoredExperiment
from pier.errors import NotFoundError
from pier.server.state import ApiState

# pier's providers under the price table's names (genai-prices), which lists their models.
PRICE_TABLE_NAMES = {"anthropic": "anthropic", "openai": "openai", "google": "google",
                     "openrouter": "openrouter", "bedrock": "aws"}  # fmt: skip
MAX_EXPERIMENTS = 1000


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    experiment_id: str
    columns: list[str]
    rows: list[dict[str, Any]]
    created_at: datetime


@dataclass(frozen=True)
class Model:
    id: str
    provider: str
    key_env: str
    via: str  # "collection" (its own key) or "trial" (the server's trial key)


def _dataset(experiment: StoredExperiment) -> Dataset | None:
    rows = ((experiment.definition.get("matrix") or {}).get("vars")) or []
    if not rows:
        return None
    columns = sorted({key for row in rows if isinstance(row, dict) for key in row})
    return Dataset(
        experiment.name,
        f"the {len(rows)} input row(s) of experiment {experiment.name!r} (task {experiment.task})",
        experiment.id,
        columns,
        [row for row in rows if isinstance(row, dict)],
        experiment.created_at,
    )


def datasets(state: ApiState, collection: str) -> list[Dataset]:
    """The collection's datasets, newest first: one per experiment with input rows."""
    found = (_dataset(e) for e in state.store.list_experiments(collection, limit=MAX_EXPERIMENTS))
    return [d for d in found if d is not None]


def dataset(state: ApiState, collection: str, name: str) -> Dataset:
    for found in datasets(state, collection):
        if name in (found.name, found.experiment_id):
            return found
    raise NotFoundError(
        f"dataset {name!r} not found in collection {collection!r}: a dataset is an experiment's input "
        f"rows (GET /api/v1/datasets/{collection} lists them)"
    )


def models(state: ApiState, collection: str) -> list[Model]:
    """The models of every provider whose key the collection's environment
    holds, or the server's trial keys hold, by the price table's list."""
    from genai_prices import data  # loaded here: only this listing needs the whole table

    own = set(state.store.get_env_encrypted(collection))
    trial = set(state.settings.trial_keys) if state.settings.trial_keys else set()
    tables = {p.id: p for p in data.providers}
    found: list[Model] = []
    for name, provider in sorted(PROVIDERS.items()):
        via = "collection" if provider.key_env in own else "trial" if provider.key_env in trial else None
        table = tables.get(PRICE_TABLE_NAMES.get(name, ""))
        if via is None or table is None:
            continue
        found.extend(Model(m.id, name, provider.key_env, via) for m in table.models)
    return found
