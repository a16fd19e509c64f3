"""Routine bodies: RoutineCreate and RoutineUpdate in, RoutinePublic out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from pier.db import StoredRoutine
from pier.record import Trajectory
from pier.routines.service import Extras

CRON = "five fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'; or @daily, @hourly, ..."
ZONE = "IANA time zone the cron expression is read in, e.g. Europe/Berlin"


# The spellings a routine body's fields are accepted under, canonical first:
# clients written against the platform pass a routine's body through as written.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "cron_expression": ("cron_expression", "cron", "schedule", "cron_schedule"),
    "timezone": ("timezone", "tz", "time_zone"),
    "init_params": ("init_params", "params", "parameters"),
    "enabled": ("enabled", "active"),
}


def spelt(field: str) -> AliasChoices:
    return AliasChoices(*SPELLINGS[field])


class _RoutineBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for names in SPELLINGS.values():
                sent = [name for name in names if name in data]
                if len(sent) > 1:
                    raise ValueError(f"{' and '.join(sent)} are the same field: send only one of them")
        return data


CADENCE = (
    "the platform's schedule, in UTC: {type: manual|hourly|daily|weekdays|weekly, hour_utc (0-23; "
    "daily, weekdays, weekly), minute_utc (0-59, default 0), day_of_week (mon..sun; weekly)}; "
    "instead of cron_expression"
)
OVERRIDES = (
    "the platform's name for init_params, whose keys must be the task's own init_params keys "
    "(merged shallowly over them at each run)"
)


class _PlatformFields(_RoutineBody):
    """The fields the platform's clients (its MCP server) send."""

    cadence: dict[str, Any] | None = Field(None, description=CADENCE)
    init_params_overrides: dict[str, Any] | None = Field(None, description=OVERRIDES)
    secret_params: dict[str, Any] | None = Field(
        None, description="secrets every run gets, stored encrypted and never shown (names only)"
    )
    paused: bool | None = Field(None, description="the platform's spelling of enabled: false")
    webhook_url: str | None = Field(
        None, max_length=2048, description="POSTed each run's record when it ends"
    )
    webhook_secret: str | None = Field(
        None, max_length=1024, description="signs the webhook; stored encrypted"
    )

    @model_validator(mode="after")
    def _one_of_each(self) -> _PlatformFields:
        sent = self.model_fields_set
        for a, b in (("cron_expression", "cadence"), ("init_params", "init_params_overrides"),
                     ("enabled", "paused")):  # fmt: skip
            if a in sent and b in sent:
                raise ValueError(f"{a} and {b} say the same thing: send only one of them")
        if (
            "cadence" in sent
            and self.cadence is not None
            and (getattr(self, "timezone", None) or "UTC") != "UTC"
        ):
            raise ValueError("a cadence is read in UTC: leave timezone out, or send a cron_expression")
        return self

    def extras(self) -> Extras:
        return Extras(
            cadence=self.cadence,
            overrides="init_params_overrides" in self.model_fields_set,
            secret_params=self.secret_params,
            webhook_url=self.webhook_url,
            webhook_secret=self.webhook_secret,
        )


class RoutineCreate(_PlatformFields):
    name: str = Field(max_length=128, description="unique among the task's routines")
    cron_expression: str | None = Field(
        None, max_length=255, description=CRON + " (or a cadence)", validation_alias=spelt("cron_expression")
    )
    timezone: str = Field("UTC", max_length=64, description=ZONE, validation_alias=spelt("timezone"))
    init_params: dict[str, Any] = Field(
        default_factory=dict, description="the parameters of every run", validation_alias=spelt("init_params")
    )
    enabled: bool = Field(True, description="false creates it paused", validation_alias=spelt("enabled"))
    description: str | None = Field(None, max_length=4096)

    def params(self) -> dict[str, Any]:
        return self.init_params_overrides if self.init_params_overrides is not None else self.init_params

    def active(self) -> bool:
        return not self.paused if self.paused is not None else self.enabled


class RoutineUpdate(_PlatformFields):
    """Only the fields sent change."""

    cron_expression: str | None = Field(
        None, max_length=255, description=CRON, validation_alias=spelt("cron_expression")
    )
    timezone: str | None = Field(None, max_length=64, description=ZONE, validation_alias=spelt("timezone"))
    init_params: dict[str, Any] | None = Field(None, validation_alias=spelt("init_params"))
    enabled: bool | None = Field(None, validation_alias=spelt("enabled"))
    description: str | None = Field(None, max_length=4096)

    def changes(self) -> dict[str, Any]:
        sent = self.model_dump(
            exclude_unset=True,
            include={"cron_expression", "timezone", "init_params", "enabled", "description"},
        )
        changes = {k: v for k, v in sent.items() if v is not None or k == "description"}
        if self.init_params_overrides is not None:
            changes["init_params"] = self.init_params_overrides
        if self.paused is not None:
            changes["enabled"] = not self.paused
        return changes


class RoutinePublic(BaseModel):
    id: int
    collection: str
    task: str
    name: str
    description: str | None
    cron_expression: str
    timezone: str
    init_params: dict[str, Any]
    enabled: bool
    paused: bool = Field(description="not enabled (the platform's spelling)")
    status: Literal["active", "paused"]
    cadence: dict[str, Any] | None = Field(
        description="the cadence it was made from; null for a cron routine"
    )
    init_params_overrides: dict[str, Any] = Field(description="the same as init_params (the platform's name)")
    secret_params: list[str] = Field(description="the names of its secret parameters (never their values)")
    webhook_url: str | None
    has_webhook_secret: bool
    next_run_at: datetime | None = Field(
        description="the next tick, in UTC; null while paused and for a manual cadence"
    )
    last_run_at: datetime | None
    last_trajectory_id: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, routine: StoredRoutine, secret_names: list[str] | None = None) -> RoutinePublic:
        data = routine.model_dump(
            exclude={"run_now_at", "secret_params_encrypted", "webhook_secret_encrypted"}
        )
        return cls(
            **data,
            paused=not routine.enabled,
            status="active" if routine.enabled else "paused",
            init_params_overrides=routine.init_params,
            secret_params=secret_names or [],
            has_webhook_secret=routine.webhook_secret_encrypted is not None,
        )


class RoutineRuns(BaseModel):
    routine_id: int
    trajectories: list[Trajectory] = Field(description="newest first")
