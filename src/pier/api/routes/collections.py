"""Collections (created by the admin; listed to whoever may see them), their
tokens (admin) and their environment."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Request, status

from pier.api.auth import AdminDep, CallerDep, CollectionDep
from pier.api.errors import ApiError
from pier.api.forms import invalid
from pier.api.observe import note
from pier.api.schemas.collections import (
    ENV_NAME_PATTERN,
    MAX_ENV_VALUE,
    CollectionCreate,
    CollectionPublic,
    EnvironmentPatch,
    EnvironmentPublic,
    QuotaOverrides,
    QuotasPublic,
    TokenIssued,
    TokenPublic,
    TokenRevoked,
)
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import ApiState, StateDep
from pier.api.tokens import issue_token
from pier.errors import NotFoundError

router = APIRouter(prefix="/api/v1/collections", tags=["collections"], responses=ERROR_RESPONSES)
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
MAX_ID = 2**31 - 1  # token ids are 32-bit integers in the store


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a collection (admin)")
def create_collection(body: CollectionCreate, _admin: AdminDep, state: StateDep) -> TokenIssued:
    """Creates the collection and its first token, shown once."""
    store = state.store
    try:
        store.get_collection(body.name)
    except NotFoundError:
        store.create_collection(body.name)
        return TokenIssued(collection=body.name, token=issue_token(store, body.name, "created"))
    raise ApiError(
        409, f"collection {body.name!r} exists: POST /api/v1/collections/{body.name}/tokens for a new token"
    )


@router.get("", summary="The collections this token may see")
def list_collections(caller: CallerDep, state: StateDep) -> list[CollectionPublic]:
    """The admin sees every collection, a collection token its own."""
    store = state.store
    found = store.list_collections() if caller.admin else [store.get_collection(caller.collection or "")]
    return [CollectionPublic(name=c.name, created_at=c.created_at) for c in found]


@router.get("/{collection}", summary="One collection")
def get_collection(collection: CollectionDep, state: StateDep) -> CollectionPublic:
    found = state.store.get_collection(collection)
    return CollectionPublic(name=found.name, created_at=found.created_at)


@router.post("/{collection}/tokens", status_code=status.HTTP_201_CREATED, summary="A new token (admin)")
def new_token(collection: CollectionDep, _admin: AdminDep, state: StateDep) -> TokenIssued:
    return TokenIssued(collection=collection, token=issue_token(state.store, collection, "api"))


@router.get("/{collection}/tokens", summary="The collection's tokens (admin)")
def list_tokens(collection: CollectionDep, _admin: AdminDep, state: StateDep) -> list[TokenPublic]:
    """Ids, labels and creation times; the tokens themselves are never kept."""
    tokens = state.store.list_tokens(collection)
    return [TokenPublic.model_validate(t.model_dump()) for t in tokens]


@router.delete("/{collection}/tokens/{token_id}", summary="Revoke a token (admin)")
def revoke_token(
    collection: CollectionDep,
    token_id: Annotated[int, Path(ge=1, le=MAX_ID, description="from the token list")],
    _admin: AdminDep,
    state: StateDep,
) -> TokenRevoked:
    """The token stops working at once, here and on every later request."""
    state.tokens.forget(state.store.revoke_token(collection, token_id))
    return TokenRevoked(collection=collection, id=token_id)


@router.get("/{collection}/environment", summary="The environment's variable names")
def get_environment(collection: CollectionDep, state: StateDep) -> EnvironmentPublic:
    """Names only: values are write-only."""
    names = state.store.list_env_names(collection)
    return EnvironmentPublic(collection=collection, environment_variables=names)


@router.patch("/{collection}/environment", summary="Set or delete variables")
def patch_environment(
    collection: CollectionDep, body: EnvironmentPatch, state: StateDep, request: Request
) -> EnvironmentPublic:
    """Merges: a value sets the variable (encrypted at rest), null deletes it,
    a variable not named is kept. Runs get the ones their runbook declares."""
    changes = body.environment_variables
    note(request, set=sorted(k for k, v in changes.items() if v is not None),
         removed=sorted(k for k, v in changes.items() if v is None))  # fmt: skip
    for name, value in body.environment_variables.items():
        _check_variable(name, value)
    for name, value in body.environment_variables.items():
        if value is None:
            state.store.delete_env(collection, name)
        else:
            state.store.set_env(collection, name, state.vault.encrypt(value))
    return EnvironmentPublic(
        collection=collection, environment_variables=state.store.list_env_names(collection)
    )


def _check_variable(name: str, value: str | None) -> None:
    field = f"environment_variables.{name}"
    if not _ENV_NAME.match(name):
        raise invalid(field, "is not a variable name: use letters, digits and '_', not starting with a digit")
    if value is not None and (len(value) > MAX_ENV_VALUE or "\x00" in value):
        raise invalid(field, f"the value must be at most {MAX_ENV_VALUE} characters, without NUL")


def _quotas(state: ApiState, collection: str) -> QuotasPublic:
    quotas = state.quotas
    return QuotasPublic(
        collection=collection,
        quotas=quotas.of(collection).as_dict(),
        overrides=state.store.quota_overrides(collection),
        defaults=quotas.defaults().as_dict(),
    )


@router.get("/{collection}/quotas", summary="The collection's quotas")
def get_quotas(collection: CollectionDep, state: StateDep) -> QuotasPublic:
    """What this collection may hold of the server: each quota in force, the
    admin's overrides and the server's defaults. A quota reached is answered 429
    with Retry-After."""
    return _quotas(state, collection)


@router.put("/{collection}/quotas", summary="Set the collection's quotas (admin)")
def put_quotas(collection: str, body: QuotaOverrides, _admin: AdminDep, state: StateDep) -> QuotasPublic:
    """Replaces the collection's overrides: a quota left out follows the server's default."""
    state.store.get_collection(collection)
    state.quotas.set_overrides(collection, body.model_dump(exclude_none=True))
    return _quotas(state, collection)
