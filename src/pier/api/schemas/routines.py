"""Routine bodies: RoutineCreate and RoutineUpdate in, RoutinePublic out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pier.db import StoredRoutine
from pier.record import Trajectory

CRON = "five fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'; or @daily, @hourly, ..."
ZONE = "IANA time zone the cron expression is read in, e.g. Europe/Berlin"


class RoutineCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=128, description="unique among the task's routines")
    cron_expression: str = Field(max_length=255, description=CRON)
    timezone: str = Field("UTC", max_length=64, description=ZONE)
    init_params: dict[str, Any] = Field(default_factory=dict, description="the parameters of every run")
    enabled: bool = Field(True, description="false creates it paused")
    description: str | None = Field(None, max_length=4096)


class RoutineUpdate(BaseModel):
    """Only the fields sent change."""

    model_config = ConfigDict(extra="forbid")

    cron_expression: str | None = Field(None, max_length=255, description=CRON)
    timezone: str | None = Field(None, max_length=64, description=ZONE)
    init_params: dict[str, Any] | None = None
    enabled: bool | None = None
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
