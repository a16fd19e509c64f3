"""What the store hands back besides Trajectory: plain frozen values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class Event(BaseModel):
    """One line of a run's log; `seq` is 1-based and contiguous per run."""

    model_config = ConfigDict(frozen=True)

    seq: int
    ts: datetime
    stage: str | None
    line: str


class Collection(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    created_at: datetime


class TokenInfo(BaseModel):
    """A token as listed: the token itself is never kept, only its hash."""

    id: int
    collection: str
    created_at: datetime
    label: str | None = None


class StoredTask(BaseModel):
    """A task as stored: `definition` is the task's JSON ({init_params, steps,
    step_configs}), validated by pier.tasks, not here."""

    model_config = ConfigDict(frozen=True)

    collection: str
    name: str
    definition: dict[str, Any]
    description: str = ""
    created_at: datetime
    updated_at: datetime


class StoredRoutine(BaseModel):
    """A routine as stored: its cron expression and time zone are checked by
    pier.routines before they get here."""

    model_config = ConfigDict(frozen=True)

    id: int
    collection: str
    task: str
    name: str
    description: str | None
    cron_expression: str
    timezone: str
    init_params: dict[str, Any]
    enabled: bool
    next_run_at: datetime | None
    run_now_at: datetime | None
    last_run_at: datetime | None
    last_trajectory_id: str | None
    created_at: datetime
    updated_at: datetime
    cadence: dict[str, Any] | None = None
    secret_params_encrypted: str | None = None
    webhook_url: str | None = None
    webhook_secret_encrypted: str | None = None


class AuditEntry(BaseModel):
    """Who (the token's id and name, or the admin), what (method and templated
    route, with the route's parameters), when, from where, and how it ended."""

    id: int | None = None
    at: datetime
    collection: str | None = None
    actor: str
    token_id: int | None = None
    token_name: str | None = None
    action: str
    target: dict[str, Any] = {}
    status: int
    client: str | None = None
    user_agent: str | None = None
    object_id: str | None = None  # the run, token, collection, task, routine it is about
    outcome: str | None = None  # ok (2xx, 3xx; a CLI change done), refused (4xx), failed (5xx)
    source: str | None = None  # api, web (the web UI's pages), cli (a command on the server's store)
    request_id: str | None = None  # the API request's id (X-Request-ID), as its log lines carry it
    prev_hash: str | None = None
    entry_hash: str | None = None


def outcome_of(status: int) -> str:
    return "ok" if status < 400 else ("refused" if status < 500 else "failed")


class StoredExperiment(BaseModel):
    """An experiment as stored (pier.experiments checks it before it gets here)."""

    model_config = ConfigDict(frozen=True)

    id: str
    collection: str
    name: str
    task: str
    definition: dict[str, Any]
    task_definition: dict[str, Any]
    cells: dict[str, Any]
    status: str
    reason: str | None
    lease_owner: str | None
    lease_until: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime
    ended_at: datetime | None


class StoredAttempt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    experiment_id: str
    seq: int
    cell: int
    attempt: int
    retry: int
    trajectory_id: str
    state: str
    outcome: str | None
    created_at: datetime
