"""Routines: a task run on a cron schedule. What a routine is and how it fires
lives in pier.routines; here the server's side: a bad field is a 422 naming it,
a taken name a 409, and run-now goes through the dispatcher like any run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pier.db import StoredRoutine
from pier.db.routines import RoutineExists
from pier.record import Trajectory
from pier.routines import RoutineError, Routines
from pier.routines.service import NO_EXTRAS, Extras, RoutineRefused
from pier.server.errors import ServiceError, invalid
from pier.server.routines import start_run
from pier.server.services.inputs import refuse_nul
from pier.server.state import ApiState


@contextmanager
def _checked() -> Iterator[None]:
    """A bad field as a 422 naming it (a rule of the platform's routine API
    as its 400); a taken name as a 409."""
    try:
        yield
    except RoutineRefused as exc:
        raise ServiceError(400, f"{exc.field}: {exc.message}") from None
    except RoutineError as exc:
        raise invalid(exc.field, exc.message) from None
    except RoutineExists as exc:
        raise ServiceError(409, str(exc)) from None


def _routines(state: ApiState) -> Routines:
    return Routines(state.store, vault=state.vault)


def secret_names(state: ApiState, routine: StoredRoutine) -> list[str]:
    """The names of the routine's secret parameters (their values stay stored)."""
    return sorted(_routines(state).fired(routine).secret_params)


def of_collection(state: ApiState, collection: str, task: str | None = None) -> list[StoredRoutine]:
    """The collection's routines, or one task's."""
    return state.store.list_routines(collection, task)


def create(
    state: ApiState,
    collection: str,
    task: str,
    name: str,
    cron_expression: str | None,
    timezone: str,
    init_params: dict[str, Any],
    enabled: bool,
    description: str | None,
    extras: Extras = NO_EXTRAS,
) -> StoredRoutine:
    """Runs the task with `init_params` at every tick of `cron_expression` in
    `timezone` (or of `extras.cadence`, in UTC), from the next tick on."""
    refuse_nul({"name": name, "cron_expression": cron_expression, "timezone": timezone,
                "init_params": init_params, "enabled": enabled, "description": description,
                "cadence": extras.cadence, "secret_params": extras.secret_params,
                "webhook_url": extras.webhook_url, "webhook_secret": extras.webhook_secret})  # fmt: skip
    if cron_expression is None and extras.cadence is None:
        raise invalid("cron_expression", "a routine needs a schedule: send cron_expression or cadence")
    with _checked():
        return _routines(state).create(
            collection, task, name, cron_expression or "", timezone, init_params, enabled, description, extras
        )


def get(state: ApiState, collection: str, task: str, name: str) -> StoredRoutine:
    return _routines(state).get(collection, task, name)


def update(
    state: ApiState,
    collection: str,
    task: str,
    name: str,
    changes: dict[str, Any],
    extras: Extras = NO_EXTRAS,
) -> StoredRoutine:
    """Only the fields given change; a new schedule counts from now."""
    refuse_nul({"changes": changes, "cadence": extras.cadence, "secret_params": extras.secret_params,
                "webhook_url": extras.webhook_url, "webhook_secret": extras.webhook_secret})  # fmt: skip
    routines = _routines(state)
    with _checked():
        return routines.update(routines.get(collection, task, name), changes, extras)


def delete(state: ApiState, collection: str, task: str, name: str) -> StoredRoutine:
    """The routine as it was; the runs it started stay readable."""
    routines = _routines(state)
    routine = routines.get(collection, task, name)
    routines.delete(routine)
    return routine


def pause(state: ApiState, collection: str, task: str, name: str) -> StoredRoutine:
    routines = _routines(state)
    return routines.pause(routines.get(collection, task, name))


def resume(state: ApiState, collection: str, task: str, name: str) -> StoredRoutine:
    """It fires from the next tick after now; ticks missed while paused are not made up."""
    routines = _routines(state)
    return routines.resume(routines.get(collection, task, name))


def run_now(state: ApiState, collection: str, task: str, name: str) -> Trajectory:
    """One run now, paused or not; the schedule is unchanged."""
    return start_run(state.dispatcher, state.store.get_routine(collection, task, name), state.vault)


def runs(
    state: ApiState, collection: str, task: str, name: str, limit: int
) -> tuple[StoredRoutine, list[Trajectory]]:
    """The routine and the runs it started, newest first."""
    store = state.store
    routine = store.get_routine(collection, task, name)
    return routine, store.routine_runs(routine, limit)
