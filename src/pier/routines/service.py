"""What the API's routine routes and `pier routine` share: every change to a
routine goes through here, checked the same way, with the time from one clock
(tests inject theirs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pier.checks import load_checks
from pier.db import Store, StoredRoutine
from pier.errors import InputError, NotFoundError
from pier.names import check_name
from pier.record import utcnow
from pier.routines import cadence as cadences
from pier.routines.schedule import RoutineError, cron_expression, next_tick, time_zone
from pier.tasks.model import Task
from pier.tasks.resolve import resolve
from pier.vault import Vault

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


class RoutineRefused(RoutineError):
    """A rule of the platform's routine API that a body breaks (its clients
    expect 400 for these, not pier's 422)."""


@dataclass(frozen=True)
class Extras:
    """What a routine made the platform's way carries beside its schedule:
    the cadence it was made from, init_params_overrides (checked against the
    task's init_params), secrets given at fire time and a webhook."""

    cadence: Mapping[str, Any] | None = None
    overrides: bool = False
    secret_params: Mapping[str, Any] | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None


NO_EXTRAS = Extras()


@dataclass(frozen=True)
class Fired:
    """What one run of a routine is sent with (secrets decrypted)."""

    init_params: dict[str, Any]
    secret_params: dict[str, str] = field(default_factory=dict)
    webhook_url: str | None = None
    webhook_secret: str | None = None


class Routines:
    def __init__(self, store: Store, clock: Clock = utcnow, vault: Vault | None = None):
        self.store = store
        self.clock = clock
        self.vault = vault

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
        extras: Extras = NO_EXTRAS,
    ) -> StoredRoutine:
        """A new routine of an existing task; RoutineError names a bad field,
        RoutineExists when the task has a routine of that name. With
        `extras.cadence`, `cron` is ignored: the cadence is the schedule, in UTC."""
        routine_name(name)
        fields = self._extras(extras)
        if "cadence" in fields:
            cron, timezone = fields.pop("cron_expression"), "UTC"
        self._check_schedule(cron, timezone)
        params = self._check_params(collection, task, dict(init_params or {}), extras.overrides)
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
            **fields,
        )

    def get(self, collection: str, task: str, name: str) -> StoredRoutine:
        return self.store.get_routine(collection, task, name)

    def update(
        self, routine: StoredRoutine, changes: Mapping[str, Any], extras: Extras = NO_EXTRAS
    ) -> StoredRoutine:
        """Change any of cron_expression, timezone, init_params, enabled,
        description (and, in `extras`, the cadence, secrets and webhook: each
        one given replaces the stored one); a new schedule (or resuming) counts
        from now. A cadence replaces a cron expression and the other way round."""
        changes = dict(changes)
        fields: dict[str, Any] = self._extras(extras)
        if "cadence" in fields:
            changes["cron_expression"], changes["timezone"] = fields.pop("cron_expression"), "UTC"
        elif "cron_expression" in changes:
            fields["cadence"] = None
        elif routine.cadence is not None and changes.get("timezone", "UTC") != "UTC":
            raise RoutineRefused("timezone", "a cadence is read in UTC: send a cron_expression to use a zone")
        cron = changes.get("cron_expression", routine.cron_expression)
        zone = changes.get("timezone", routine.timezone)
        enabled = changes.get("enabled", routine.enabled)
        self._check_schedule(cron, zone)
        fields.update({k: v for k, v in changes.items() if k in ("description", "enabled")})
        if "cron_expression" in changes:
            fields["cron_expression"] = cron.strip()
        if "timezone" in changes:
            fields["timezone"] = zone
        if "init_params" in changes:
            fields["init_params"] = self._check_params(
                routine.collection, routine.task, changes["init_params"], extras.overrides
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

    def fired(self, routine: StoredRoutine) -> Fired:
        """What the routine's next run is sent with: its init_params, and its
        secrets and webhook decrypted."""
        secrets: dict[str, str] = {}
        webhook_secret = None
        if routine.secret_params_encrypted is not None:
            secrets = json.loads(self._vault().decrypt(routine.secret_params_encrypted))
        if routine.webhook_secret_encrypted is not None:
            webhook_secret = self._vault().decrypt(routine.webhook_secret_encrypted)
        return Fired(dict(routine.init_params), secrets, routine.webhook_url, webhook_secret)

    def _vault(self) -> Vault:
        if self.vault is None:  # a programming error: whoever stores secrets holds the vault
            raise RuntimeError("this routine has secrets and no vault was given to read them")
        return self.vault

    def _extras(self, extras: Extras) -> dict[str, Any]:
        """The stored columns of what `extras` gives (only what it gives)."""
        fields: dict[str, Any] = {}
        if extras.cadence is not None:
            try:
                checked = cadences.checked(extras.cadence)
            except RoutineError as exc:
                raise RoutineRefused(exc.field, exc.message) from None
            fields["cadence"] = checked
            fields["cron_expression"] = cadences.cron_of(checked)
        if extras.secret_params is not None:
            bad = sorted(k for k, v in extras.secret_params.items() if not isinstance(v, str))
            if bad:
                raise RoutineRefused(f"secret_params.{bad[0]}", "a secret's value must be a string")
            fields["secret_params_encrypted"] = (
                self._vault().encrypt(json.dumps(dict(extras.secret_params)))
                if extras.secret_params
                else None
            )
        if extras.webhook_url is not None:
            if not extras.webhook_url.startswith(("http://", "https://")):
                raise RoutineError("webhook_url", "must be an http:// or https:// URL")
            fields["webhook_url"] = extras.webhook_url
        if extras.webhook_secret is not None:
            fields["webhook_secret_encrypted"] = self._vault().encrypt(extras.webhook_secret)
        return fields

    def _next(self, cron: str, zone: str) -> datetime | None:
        if cron == cadences.MANUAL:  # a saved preset: only run-now fires it
            return None
        return next_tick(cron, zone, self.clock())

    @staticmethod
    def _check_schedule(cron: str, zone: str) -> None:
        if cron != cadences.MANUAL:
            cron_expression(cron)
        time_zone(zone)

    def _check_params(
        self, collection: str, task: str, params: dict[str, Any], overrides: bool = False
    ) -> dict[str, Any]:
        """params, when the task exists and would take them. As overrides (the
        platform's init_params_overrides), their keys must be the task's own."""
        try:
            definition = self.store.get_task(collection, task).definition
        except NotFoundError:
            raise RoutineError(
                "task", f"{task!r} is not a task of collection {collection!r}: push it first"
            ) from None
        if overrides:
            known = set(definition.get("init_params") or {})
            unknown = sorted(set(params) - known)
            if unknown:
                raise RoutineRefused(
                    "init_params_overrides",
                    f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not in the "
                    f"task's init_params (it has: {', '.join(sorted(known)) or 'none'}): override only those",
                )
        for key in SECRET_KEYS:
            if key in params:
                raise RoutineError(
                    f"init_params.{key}", "a routine's parameters are stored in clear: leave secrets out"
                )
        try:
            parsed = Task.model_validate(definition)
            if not parsed.is_workflow:  # a workflow's params are checked when each run is accepted
                step = resolve(parsed, params)
                load_checks(step.checks, None)
        except InputError as exc:
            raise RoutineError("init_params", str(exc)) from None
        return params
