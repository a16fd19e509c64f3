"""What the API's routine routes and `pier routine` share: every change to a
routine goes through here, checked the same way, with the time from one clock
(tests inject theirs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pier.checks import load_checks
from pier.db import Store, StoredRoutine
from pier.errors import InputError, NotFoundError
from pier.names import check_name
from pier.record import utcnow
from pier.routines.schedule import RoutineError, cron_expression, next_tick, time_zone
from pier.tasks.model import Task
from pier.tasks.resolve import resolve

Clock = Callable[[], datetime]
MAX_NAME = 128
# A routine's init_params are stored as they are: no place for a secret.
SECRET_KEYS = ("webhook_secret",)


def routine_name(name: str) -> str:
    try:
        if len(name) > MAX_NAME:
            raise InputError(f"is {len(name)} characters long: use at most {MAX_NAME}")
        check_name("routine", name)
    except InputError as exc:
        raise RoutineError("name", str(exc)) from None
    return name


class Routines:
    def __init__(self, store: Store, clock: Clock = utcnow):
        self.store = store
        self.clock = clock

    def create(
        self,
        collection: str,
        task: str,
        name: str,
        cron: str,
        timezone: str = "UTC",
        init_params: Mapping[str, Any] | None = None,
        enabled: bool = True,
        description: str | None = None,
    ) -> StoredRoutine:
        """A new routine of an existing task; RoutineError names a bad field,
        RoutineExists when the task has a routine of that name."""
        routine_name(name)
        self._check_schedule(cron, timezone)
        params = self._check_params(collection, task, dict(init_params or {}))
        return self.store.create_routine(
            collection=collection,
            task=task,
            name=name,
            description=description,
            cron_expression=cron.strip(),
            timezone=timezone,
            init_params=params,
            enabled=enabled,
            next_run_at=self._next(cron, timezone) if enabled else None,
            run_now_at=None,
            last_run_at=None,
            last_trajectory_id=None,
        )

    def get(self, collection: str, task: str, name: str) -> StoredRoutine:
        return self.store.get_routine(collection, task, name)

    def update(self, routine: StoredRoutine, changes: Mapping[str, Any]) -> StoredRoutine:
        """Change any of cron_expression, timezone, init_params, enabled,
        description; a new schedule (or resuming) counts from now."""
        cron = changes.get("cron_expression", routine.cron_expression)
        zone = changes.get("timezone", routine.timezone)
        enabled = changes.get("enabled", routine.enabled)
        self._check_schedule(cron, zone)
        fields: dict[str, Any] = {k: v for k, v in changes.items() if k in ("description", "enabled")}
        if "cron_expression" in changes:
            fields["cron_expression"] = cron.strip()
        if "timezone" in changes:
            fields["timezone"] = zone
        if "init_params" in changes:
            fields["init_params"] = self._check_params(
                routine.collection, routine.task, changes["init_params"]
            )
        rescheduled = {"cron_expression", "timezone"} & set(changes) or enabled != routine.enabled
        if rescheduled:
            fields["next_run_at"] = self._next(cron, zone) if enabled else None
        return self.store.update_routine(routine.id, **fields)

    def pause(self, routine: StoredRoutine) -> StoredRoutine:
        """No tick fires until it is resumed (a run already started goes on)."""
        return self.update(routine, {"enabled": False})

    def resume(self, routine: StoredRoutine) -> StoredRoutine:
        """Fires again from the next tick after now: ticks missed while paused are not made up."""
        return self.update(routine, {"enabled": True})

    def delete(self, routine: StoredRoutine) -> None:
        """The routine goes; the runs it started stay readable."""
        if not self.store.delete_routine(routine.id):
            raise NotFoundError(f"routine {routine.name!r} was already deleted")

    def request_run_now(self, routine: StoredRoutine) -> StoredRoutine:
        """Ask whichever server polls first to fire it once now, paused or not."""
        return self.store.update_routine(routine.id, run_now_at=self.clock())

    def _next(self, cron: str, zone: str) -> datetime:
        return next_tick(cron, zone, self.clock())

    @staticmethod
    def _check_schedule(cron: str, zone: str) -> None:
        cron_expression(cron)
        time_zone(zone)

    def _check_params(self, collection: str, task: str, params: dict[str, Any]) -> dict[str, Any]:
        """params, when the task exists and would take them."""
        try:
            definition = self.store.get_task(collection, task).definition
        except NotFoundError:
            raise RoutineError(
                "task", f"{task!r} is not a task of collection {collection!r}: push it first"
            ) from None
        for key in SECRET_KEYS:
            if key in params:
                raise RoutineError(
                    f"init_params.{key}", "a routine's parameters are stored in clear: leave secrets out"
                )
        try:
            step = resolve(Task.model_validate(definition), params)
            load_checks(step.checks, None)
        except InputError as exc:
            raise RoutineError("init_params", str(exc)) from None
        return params
