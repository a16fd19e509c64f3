"""What an operator reads: `/metrics` (Prometheus) and the audit log
(`/api/v1/audit`), which the Observe middleware (observe.py) writes."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from pier.api.auth import CallerDep
from pier.api.errors import ApiError
from pier.api.observe import bearer_token
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.db.schemas import AuditEntry
from pier.server.services import audit
from pier.server.state import ApiState
from pier.telemetry import metrics

router = APIRouter(tags=["operations"], responses=ERROR_RESPONSES)


def _may_scrape(state: ApiState, request: Request) -> bool:
    token = bearer_token({"authorization": request.headers.get("authorization", "")})
    if token is None:
        return False
    for secret in (state.settings.metrics_token, state.settings.admin_token):
        if secret is not None and hmac.compare_digest(token.encode(), secret.get_secret_value().encode()):
            return True
    return False


@router.get(
    "/metrics",
    summary="Prometheus metrics (PIER_METRICS_TOKEN or the admin token)",
    response_class=Response,
)
def prometheus_metrics(state: StateDep, request: Request) -> Response:
    if not _may_scrape(state, request):
        raise ApiError(
            401,
            "metrics need `Authorization: Bearer <PIER_METRICS_TOKEN>` (or the admin token); "
            "or set PIER_METRICS_ADDRESS for a listener of their own",
        )
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


@router.get("/api/v1/audit", summary="The audit log: who changed what (admin: all; a collection: its own)")
def audit_log(
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="only this collection's")] = None,
    action: Annotated[str | None, Query(description="actions containing this text, e.g. DELETE")] = None,
    actor: Annotated[str | None, Query(description="admin, token:<id>, anonymous")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[
        int | None, Query(ge=1, le=2**63 - 1, description="entries older than this id (paging)")
    ] = None,
) -> list[AuditEntry]:
    return audit.entries(
        state, caller, collection=collection, action=action, actor=actor, limit=limit, before_id=before
    )
