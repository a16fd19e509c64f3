"""Liveness, without a token."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Request

from pier.api.schemas.common import Health
from pier.api.state import get_state

router = APIRouter(tags=["health"])


@router.get("/health", summary="Is the server up")
@router.get("/api/v1/health", summary="Is the server up", include_in_schema=False)
def health(request: Request) -> Health:
    executor = get_state(request).dispatcher.executor
    return Health(
        status="ok", version=version("pier"), running=len(executor.running()), pending=len(executor.pending())
    )
