"""Health, without a token: `/health/live` for "restart me if this fails"
(the process answers), `/health/ready` for "send me work" (every service this
mode needs answers: the database, the sandbox engine, the run storage, and
Temporal for a fleet; else 503 naming which does not), and `/health`, which
reports the database and the engine and always answers 200 while the process
is up."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as ProbeTimeout
from importlib.metadata import version

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from pier.api.schemas.common import Health, Readiness
from pier.api.state import StateDep
from pier.db.retry import disk_full
from pier.errors import PierError
from pier.server.state import ApiState

router = APIRouter(tags=["health"])

OK = "ok"
PROBE_TIMEOUT_SEC = 5.0  # a load balancer's check must get an answer, not wait on a hung engine
_probes = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pier-probe")
_side = ThreadPoolExecutor(
    max_workers=3, thread_name_prefix="pier-ready"
)  # waits on _probes: never the same pool


def _bounded(probe: Callable[[], str], what: str) -> str:
    """`probe()`, or why it did not answer within PROBE_TIMEOUT_SEC."""
    try:
        return _probes.submit(probe).result(PROBE_TIMEOUT_SEC)
    except ProbeTimeout:
        return f"{what} did not answer within {PROBE_TIMEOUT_SEC:g}s"


def storage_status(state: ApiState) -> str:
    def probe() -> str:
        try:
            state.services.storage.check()
        except Exception as exc:  # any client error: say it
            first_line = (str(exc).strip().splitlines() or [""])[0]
            return f"the run storage does not answer ({type(exc).__name__}: {first_line[:300]})"
        return OK

    return _bounded(probe, "the run storage")


def temporal_status(state: ApiState) -> str | None:
    executor = state.dispatcher.executor
    if not executor.durable:
        return None
    return _bounded(lambda: executor.ready() or OK, "Temporal")


def engine_status(state: ApiState) -> str:
    try:
        state.services.backend.ping(timeout=PROBE_TIMEOUT_SEC)
    except PierError as exc:
        return str(exc)
    return OK


DATABASE_MIN_FREE_BYTES = 1 << 20  # SQLite's disk with less than this takes no more writes: not ready


def database_status(state: ApiState) -> str:
    try:
        state.store.ping()
        free = state.store.free_bytes()
    except Exception as exc:  # any driver error: the point is to say it, not to raise
        first_line = (str(exc).strip().splitlines() or [""])[0]
        if disk_full(exc):
            return f"the database's disk is full ({type(exc).__name__}: {first_line[:300]})"
        return f"the database does not answer ({type(exc).__name__}: {first_line[:300]})"
    if free is not None and free < DATABASE_MIN_FREE_BYTES:
        return f"the database's disk is full ({free} bytes free): free space where the database lives"
    return OK


@router.get("/health", summary="Is the server up, and do the database and the engine answer")
@router.get("/api/v1/health", summary="Is the server up", include_in_schema=False)
def health(state: StateDep) -> Health:
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
    summary="Readiness: 200 when every service this mode needs answers, else 503",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "a service the server needs does not answer"}},
)
def ready(state: StateDep) -> JSONResponse:
    body = readiness(state)
    if body.status != "ready":
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse(body.model_dump())


def readiness(state: ApiState) -> Readiness:
    """What /health/ready answers (and `pier_ready` exports): the probes run
    side by side, so one hung service costs PROBE_TIMEOUT_SEC, not one each."""
    engine = _side.submit(engine_status, state)
    storage = _side.submit(storage_status, state)
    temporal = _side.submit(temporal_status, state)
    body = Readiness(
        status="ready",
        engine=engine.result(),
        database=_bounded(lambda: database_status(state), "the database"),
        storage=storage.result(),
        temporal=temporal.result(),
    )
    body.draining = state.dispatcher.draining
    if body.draining is not None or any(
        value not in (OK, None) for value in (body.engine, body.database, body.storage, body.temporal)
    ):
        body.status = "unready"
    return body


def ready_services(state: ApiState) -> dict[str, bool]:
    """Service name -> whether it answers, for the `pier_ready` gauge."""
    body = readiness(state)
    answers = {"engine": body.engine, "database": body.database, "storage": body.storage}
    if body.temporal is not None:
        answers["temporal"] = body.temporal
    return {name: value == OK for name, value in answers.items()}
