"""Liveness, without a token."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter

from pier.api.schemas.common import Health
from pier.api.state import StateDep

router = APIRouter(tags=["health"])


@router.get("/health", summary="Is the server up")
@router.get("/api/v1/health", summary="Is the server up", include_in_schema=False)
def health(state: StateDep) -> Health:
    executor = state.dispatcher.executor
    return Health(
        status="ok", version=version("pier"), running=len(executor.running()), pending=len(executor.pending())
    )
