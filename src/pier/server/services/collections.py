"""Collections and what each one holds of the server's settings: its tokens
(the admin's), its environment (names out, values in) and its quotas."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pier.db import Collection, Store
from pier.db.schemas import TokenInfo
from pier.errors import NotFoundError
from pier.server.auth import Caller
from pier.server.errors import ServiceError, invalid
from pier.server.models import ENV_NAME_PATTERN, MAX_ENV_VALUE
from pier.server.state import ApiState
from pier.server.tokens import issue_token as _issue
from pier.vault import Vault

_ENV_NAME = re.compile(ENV_NAME_PATTERN)


def create(state: ApiState, name: str) -> str:
    """A new collection and its first token (shown once); 409 when it exists."""
    store = state.store
    try:
        store.get_collection(name)
    except NotFoundError:
        store.create_collection(name)
        return _issue(store, name, "created")
    raise ServiceError(
        409, f"collection {name!r} exists: POST /api/v1/collections/{name}/tokens for a new token"
    )


def get(state: ApiState, collection: str) -> Collection:
    return state.store.get_collection(collection)


def visible(state: ApiState, caller: Caller) -> list[Collection]:
    """The collections this caller may see: the admin every one, a collection token its own."""
    store = state.store
    return store.list_collections() if caller.admin else [store.get_collection(caller.collection or "")]


def names(state: ApiState, caller: Caller) -> list[str]:
    """The names of the collections this caller sees runs of: for the admin,
    also the ones that only have runs (`local`, where `pier run` puts its runs)."""
    stored = [c.name for c in visible(state, caller)]
    if not caller.admin:
        return stored
    return sorted(set(stored) | set(state.store.run_collections()))


# tokens (the admin's to issue, list and revoke)


def issue_token(state: ApiState, collection: str, label: str | None) -> str:
    """A new token of an existing collection, shown once: only its hash is kept."""
    return _issue(state.store, collection, label)


def tokens(state: ApiState, collection: str) -> list[TokenInfo]:
    """Ids, labels and creation times; the tokens themselves are never kept."""
    return state.store.list_tokens(collection)


def revoke_token(state: ApiState, collection: str, token_id: int) -> None:
    """The token stops working at once, here and on every later request."""
    state.tokens.forget(state.store.revoke_token(collection, token_id))


# the environment


def environment(state: ApiState, collection: str) -> list[str]:
    """The variables' names: values are write-only."""
    return state.store.list_env_names(collection)


def environment_audit(changes: dict[str, str | None]) -> dict[str, list[str]]:
    """What a change of the environment adds to its audit entry: names, never values."""
    return {"set": sorted(k for k, v in changes.items() if v is not None),
            "removed": sorted(k for k, v in changes.items() if v is None)}  # fmt: skip


def change_environment(state: ApiState, collection: str, changes: dict[str, str | None]) -> list[str]:
    """Merges: a value sets the variable (encrypted at rest), None deletes it, a
    variable not named is kept. Every name and value is checked before any is
    stored. The names after the change."""
    return apply_environment(state.store, state.vault, collection, changes)


def apply_environment(
    store: Store, vault: Vault, collection: str, changes: dict[str, str | None]
) -> list[str]:
    """change_environment on a store and vault (`pier collection env` has no server)."""
    for name, value in changes.items():
        _check_variable(name, value)
    for name, value in changes.items():
        if value is None:
            store.delete_env(collection, name)
        else:
            store.set_env(collection, name, vault.encrypt(value))
    return store.list_env_names(collection)


def _check_variable(name: str, value: str | None) -> None:
    field = f"environment_variables.{name}"
    if not _ENV_NAME.match(name):
        raise invalid(field, "is not a variable name: use letters, digits and '_', not starting with a digit")
    if value is not None and (len(value) > MAX_ENV_VALUE or "\x00" in value):
        raise invalid(field, f"the value must be at most {MAX_ENV_VALUE} characters, without NUL")


# quotas


@dataclass(frozen=True)
class Quotas:
    collection: str
    in_force: dict[str, int | None]  # the admin's overrides, else the server's defaults
    overrides: dict[str, int | None]
    defaults: dict[str, int | None]


def quotas(state: ApiState, collection: str) -> Quotas:
    return Quotas(
        collection=collection,
        in_force=state.quotas.of(collection).as_dict(),
        overrides=state.store.quota_overrides(collection),
        defaults=state.quotas.defaults().as_dict(),
    )


def set_quotas(state: ApiState, collection: str, overrides: dict[str, Any]) -> Quotas:
    """Replaces the collection's overrides (404 when it does not exist): a quota
    left out follows the server's default."""
    state.store.get_collection(collection)
    state.quotas.set_overrides(collection, overrides)
    return quotas(state, collection)
