"""How a route (or a dependency) reaches the server's shared state (`ApiState`,
built once per server in app.py's lifespan)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from pier.server.state import ApiState


def get_state(request: Request) -> ApiState:
    return request.app.state.pier


# What a route (or a dependency) takes to reach the server's shared state.
StateDep = Annotated[ApiState, Depends(get_state)]
