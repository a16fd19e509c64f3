"""The fleet (runs on Temporal, executed by `pier worker`s) and how a run rides
out the faults of the services around it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pier.settings.server import _default_concurrency


class FleetSettings(BaseModel):
    """Who executes runs (in `pier serve`, or `pier worker`s through Temporal), and
    how long a run rides out a service that does not answer."""

    executor: Literal["inprocess", "temporal"] = Field(
        "inprocess", description="inprocess: runs execute in `pier serve`; temporal: on `pier worker`s"
    )
    temporal_address: str = Field("127.0.0.1:7233", description="Temporal frontend host:port")
    temporal_namespace: str = Field("default", description="the Temporal namespace runs' workflows live in")
    temporal_task_queue: str = Field("pier-runs", description="the queue runs wait on for a worker")
    worker_identity: str | None = Field(None, description="a `pier worker`'s name; default host-pid")
    worker_slots: int = Field(default_factory=_default_concurrency, ge=1, description="runs a worker holds")
    worker_steps: int = Field(
        16,
        ge=1,
        description="workflow steps (model calls, text steps, a fan-out's bookkeeping) a worker runs at once; "
        "a fan-out's runbook children take run slots",
    )
    heartbeat_timeout_sec: float = Field(
        15, gt=0, description="a worker silent this long is lost: its run restarts or fails"
    )
    schedule_to_start_sec: float = Field(
        15, gt=0, description="how long a stage waits for its sandbox's worker to take it"
    )
    # Faults: how long a run rides out a service that does not answer, and how
    # the server finds the runs a fault left without an owner (docs/faults.md).
    db_retry_sec: float = Field(
        120, ge=0, description="how long a run's database write is tried again while the database is down"
    )
    reconcile_interval_sec: float = Field(
        15, gt=0, description="how often a fleet server resubmits or ends runs a fault left ownerless"
    )
    submit_timeout_sec: float = Field(
        30, gt=0, description="how long accepting a run waits for Temporal before refusing it (503)"
    )
    disk_reserve_bytes: int = Field(
        64 << 20,
        ge=0,
        description="free space collect leaves on the scratch and database disks, or fails early",
    )
    storage_abandoned_upload_sec: float = Field(
        86400,
        gt=0,
        description="the sweep aborts incomplete multipart uploads (S3) begun longer ago than this",
    )
    storage_retry_sec: float = Field(
        120, ge=0, description="how long save tries again to store a run's outputs while storage fails"
    )
