"""Health, without a token: `/health/live` for "restart me if this fails"
(the process answers), `/health/ready` for "send me work" (the database and the
sandbox engine answer, else 503 naming which does not), and `/health`, which
reports both and always answers 200 while the process is up."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from pier.api.schemas.common import Health, Readiness
from pier.api.state import ApiState, get_state
from pier.errors import PierError

router = APIRouter(tags=["health"])

OK = "ok"
PROBE_TIMEOUT_SEC = 5.0  # a load balancer's check must get an answer, not wait on a hung engine


def engine_status(state: ApiState) -> str:
    try:
        state.services.backend.ping(timeout=PROBE_TIMEOUT_SEC)
    except PierError as exc:
        return str(exc)
    return OK


def database_status(state: ApiState) -> str:
    try:
        state.store.ping()
    except Exception as exc:  # any driver error: the point is to say it, not to raise
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return f"the database does not answer ({type(exc).__name__}: {first_line[:300]})"
    return OK


@router.get("/health", summary="Is the server up, and do the database and the engine answer")
@router.get("/api/v1/health", summary="Is the server up", include_in_schema=False)
def health(request: Request) -> Health:
    state = get_state(request)
    executor = state.dispatcher.executor
    database, engine = database_status(state), engine_status(state)
    return Health(
        status=OK if database == engine == OK else "degraded",
        version=version("pier"),
        running=len(executor.running()),
        pending=len(executor.pending()),
        engine=engine,
        database=database,
    )


@router.get("/health/live", summary="Liveness: the process answers (always 200)")
def live() -> dict[str, str]:
    return {"status": OK}


@router.get(
    "/health/ready",
    summary="Readiness: 200 when the database and the sandbox engine answer, else 503",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "the database or the engine does not answer"}},
)
def ready(request: Request) -> JSONResponse:
    state = get_state(request)
    body = Readiness(status="ready", engine=engine_status(state), database=database_status(state))
    if body.engine != OK or body.database != OK:
        body.status = "unready"
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse(body.model_dump())
