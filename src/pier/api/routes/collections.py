"""Collections (created by the admin; listed to whoever may see them), their
tokens (admin) and their environment."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, status

from pier.api.auth import AdminDep, CallerDep, CollectionDep
from pier.api.schemas.collections import (
    CollectionCreate,
    CollectionPublic,
    EnvironmentPatch,
    EnvironmentPublic,
    ModelUsagePublic,
    ModelUsageRow,
    QuotaOverrides,
    QuotasPublic,
    TokenIssued,
    TokenPublic,
    TokenRevoked,
)
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.db import Collection
from pier.server.services import collections as service
from pier.server.services import passthrough
from pier.telemetry.audit import note

router = APIRouter(prefix="/api/v1/collections", tags=["collections"], responses=ERROR_RESPONSES)
MAX_ID = 2**31 - 1  # token ids are 32-bit integers in the store


def _public(found: Collection) -> CollectionPublic:
    return CollectionPublic(name=found.name, created_at=found.created_at)


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a collection (admin)")
def create_collection(
    body: CollectionCreate, _admin: AdminDep, state: StateDep, request: Request
) -> TokenIssued:
    """Creates the collection and its first token, shown once."""
    issued = TokenIssued(collection=body.name, token=service.create(state, body.name))
    note(request, object_id=body.name)
    return issued


@router.get("", summary="The collections this token may see")
def list_collections(caller: CallerDep, state: StateDep) -> list[CollectionPublic]:
    """The admin sees every collection, a collection token its own."""
    return [_public(c) for c in service.visible(state, caller)]


@router.get("/{collection}", summary="One collection")
def get_collection(collection: CollectionDep, state: StateDep) -> CollectionPublic:
    return _public(service.get(state, collection))


@router.post("/{collection}/tokens", status_code=status.HTTP_201_CREATED, summary="A new token (admin)")
def new_token(collection: CollectionDep, _admin: AdminDep, state: StateDep) -> TokenIssued:
    return TokenIssued(collection=collection, token=service.issue_token(state, collection, "api"))


@router.get("/{collection}/tokens", summary="The collection's tokens (admin)")
def list_tokens(collection: CollectionDep, _admin: AdminDep, state: StateDep) -> list[TokenPublic]:
    """Ids, labels and creation times; the tokens themselves are never kept."""
    return [TokenPublic.model_validate(t.model_dump()) for t in service.tokens(state, collection)]


@router.delete("/{collection}/tokens/{token_id}", summary="Revoke a token (admin)")
def revoke_token(
    collection: CollectionDep,
    token_id: Annotated[int, Path(ge=1, le=MAX_ID, description="from the token list")],
    _admin: AdminDep,
    state: StateDep,
) -> TokenRevoked:
    """The token stops working at once, here and on every later request."""
    service.revoke_token(state, collection, token_id)
    return TokenRevoked(collection=collection, id=token_id)


@router.get("/{collection}/environment", summary="The environment's variable names")
def get_environment(collection: CollectionDep, state: StateDep) -> EnvironmentPublic:
    """Names only: values are write-only."""
    return EnvironmentPublic.of(collection, service.environment(state, collection))


@router.patch("/{collection}/environment", summary="Set or delete variables")
def patch_environment(
    collection: CollectionDep, body: EnvironmentPatch, state: StateDep, request: Request
) -> EnvironmentPublic:
    """Merges: a value sets the variable (encrypted at rest), null deletes it,
    a variable not named is kept. Runs get the ones their runbook declares."""
    changes = body.environment_variables
    note(request, **service.environment_audit(changes))
    names = service.change_environment(state, collection, changes)
    return EnvironmentPublic.of(collection, names)


def _quotas(found: service.Quotas) -> QuotasPublic:
    return QuotasPublic(
        collection=found.collection, quotas=found.in_force, overrides=found.overrides, defaults=found.defaults
    )


@router.get("/{collection}/usage", summary="The collection's model usage outside runs")
def get_usage(collection: CollectionDep, state: StateDep) -> ModelUsagePublic:
    """What the collection's calls through the chat-completions passthrough
    (`POST /v1/chat/completions` without a runbook) used: requests, tokens and
    cost by provider, model and key source, as pier's model gateway counted
    them. A run's own model usage is on its record (`steps.run.outputs.usage`)."""
    found = passthrough.usage(state, collection)
    return ModelUsagePublic(collection=collection, totals=found.totals,
                            models=[ModelUsageRow(**row) for row in found.rows])  # fmt: skip


@router.get("/{collection}/quotas", summary="The collection's quotas")
def get_quotas(collection: CollectionDep, state: StateDep) -> QuotasPublic:
    """What this collection may hold of the server: each quota in force, the
    admin's overrides and the server's defaults. A quota reached is answered 429
    with Retry-After."""
    return _quotas(service.quotas(state, collection))


@router.put("/{collection}/quotas", summary="Set the collection's quotas (admin)")
def put_quotas(collection: str, body: QuotaOverrides, _admin: AdminDep, state: StateDep) -> QuotasPublic:
    """Replaces the collection's overrides: a quota left out follows the server's default."""
    return _quotas(service.set_quotas(state, collection, body.model_dump(exclude_none=True)))
