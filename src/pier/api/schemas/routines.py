"""Routine bodies: RoutineCreate and RoutineUpdate in, RoutinePublic out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from pier.db import StoredRoutine
from pier.record import Trajectory

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


class RoutineCreate(_RoutineBody):
    name: str = Field(max_length=128, description="unique among the task's routines")
    cron_expression: str = Field(max_length=255, description=CRON, validation_alias=spelt("cron_expression"))
    timezone: str = Field("UTC", max_length=64, description=ZONE, validation_alias=spelt("timezone"))
    init_params: dict[str, Any] = Field(
        default_factory=dict, description="the parameters of every run", validation_alias=spelt("init_params")
    )
    enabled: bool = Field(True, description="false creates it paused", validation_alias=spelt("enabled"))
    description: str | None = Field(None, max_length=4096)


class RoutineUpdate(_RoutineBody):
    """Only the fields sent change."""

    cron_expression: str | None = Field(
        None, max_length=255, description=CRON, validation_alias=spelt("cron_expression")
    )
    timezone: str | None = Field(None, max_length=64, description=ZONE, validation_alias=spelt("timezone"))
    init_params: dict[str, Any] | None = Field(None, validation_alias=spelt("init_params"))
    enabled: bool | None = Field(None, validation_alias=spelt("enabled"))
    description: str | None = Field(None, max_length=4096)

    def changes(self) -> dict[str, Any]:
        sent = self.model_dump(exclude_unset=True)
        return {k: v for k, v in sent.items() if v is not None or k == "description"}


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
    status: Literal["active", "paused"]
    next_run_at: datetime | None = Field(description="the next tick, in UTC; null while paused")
    last_run_at: datetime | None
    last_trajectory_id: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, routine: StoredRoutine) -> RoutinePublic:
        data = routine.model_dump(exclude={"run_now_at"})
        return cls(**data, status="active" if routine.enabled else "paused")


class RoutineRuns(BaseModel):
    routine_id: int
    trajectories: list[Trajectory] = Field(description="newest first")
