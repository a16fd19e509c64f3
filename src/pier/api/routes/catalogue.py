"""The platform's listings of what a collection works with: datasets and models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from pier.api.auth import CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.errors import NotFoundError
from pier.server.services import catalogue as service

router = APIRouter(prefix="/api/v1", tags=["catalogue"], responses=ERROR_RESPONSES)


class DatasetSummary(BaseModel):
    name: str = Field(description="the experiment whose input rows it is")
    description: str
    experiment_id: str
    columns: list[str]
    row_count: int
    created_at: datetime


class DatasetPublic(DatasetSummary):
    rows: list[dict[str, Any]]


class ModelPublic(BaseModel):
    id: str
    name: str = Field(description="the same as id: the platform's clients list models by name")
    object: str = "model"
    provider: str = Field(description="the model_provider a run names to use it")
    owned_by: str
    key_env: str = Field(description="the variable whose key reaches it")
    via: str = Field(description="collection: its own key; trial: the server's trial key")


def _model(found: service.Model) -> ModelPublic:
    return ModelPublic(id=found.id, name=found.id, provider=found.provider, owned_by=found.provider,
                       key_env=found.key_env, via=found.via)  # fmt: skip


def _summary(found: service.Dataset) -> dict[str, Any]:
    return {"name": found.name, "description": found.description, "experiment_id": found.experiment_id,
            "columns": found.columns, "row_count": len(found.rows), "created_at": found.created_at}  # fmt: skip


@router.get("/datasets/{collection}", summary="The collection's datasets")
def list_datasets(collection: CollectionDep, state: StateDep) -> list[DatasetSummary]:
    """One per experiment with input rows (its matrix's vars or dataset), newest first."""
    return [DatasetSummary(**_summary(d)) for d in service.datasets(state, collection)]


@router.get("/datasets/{collection}/{dataset}", summary="A dataset and its rows")
def get_dataset(collection: CollectionDep, dataset: str, state: StateDep) -> DatasetPublic:
    found = service.dataset(state, collection, dataset)
    return DatasetPublic(**_summary(found), rows=found.rows)


@router.get("/models/{collection}", summary="The models the collection can reach")
def list_models(collection: CollectionDep, state: StateDep) -> list[ModelPublic]:
    """Every model (by the price table's list) of each provider whose key the
    collection's environment, or the server's trial keys, hold."""
    return [_model(m) for m in service.models(state, collection)]


@router.get("/models/{collection}/{model:path}", summary="One model the collection can reach")
def get_model(collection: CollectionDep, model: str, state: StateDep) -> ModelPublic:
    for m in service.models(state, collection):
        if model in (m.id, f"{m.provider}/{m.id}"):
            return _model(m)
    raise NotFoundError(
        f"model {model!r} is not one collection {collection!r} can reach: GET /api/v1/models/{collection}/ "
        "lists them (set a provider's key in the collection's environment to reach its models)"
    )
