"""The audit log, as a caller may read it: the admin every collection's
entries, a collection token its own collection's."""

from __future__ import annotations

from pier.db import AuditEntry
from pier.server.auth import Caller
from pier.server.state import ApiState


def scope(caller: Caller, collection: str | None) -> str | None:
    """The collection whose entries the caller reads: the admin's choice (None:
    every one); a collection token's own (403 for another)."""
    if caller.admin:
        return collection
    return caller.check(collection) if collection else caller.collection


def entries(
    state: ApiState,
    caller: Caller,
    *,
    collection: str | None = None,
    action: str | None = None,
    actor: str | None = None,
    limit: int = 100,
    before_id: int | None = None,
) -> list[AuditEntry]:
    """Newest first: who changed what, filtered by collection, by text in the
    action (`DELETE`), by actor (`admin`, `token:<id>`, `anonymous`)."""
    return state.store.list_audit(
        collection=scope(caller, collection), action=action, actor=actor, limit=limit, before_id=before_id
    )
