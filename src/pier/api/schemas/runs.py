"""Run bodies: RunCreate in, RunAccepted / RunPublic / TrajectoryPage out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from pier.record import RunRecord, RunStatus

SecretParams = dict[str, str]


class RunCreate(BaseModel):
    """A run's parameters as JSON. The same fields come as multipart form fields
    (init_params and secret_params as JSON strings) with repeatable `files`."""

    model_config = ConfigDict(extra="forbid")

    init_params: dict[str, Any] = Field(
        default_factory=dict,
        description="merged into the task's init_params per top-level key",
    )
    secret_params: SecretParams = Field(
        default_factory=dict,
        description="environment variables for this run only; never stored or returned",
    )
    webhook_url: str | None = Field(None, description="POSTed the run record when the run ends")
    webhook_secret: str | None = Field(None, description="signs the webhook (X-Pier-Signature)")


def workflow_id(record: RunRecord) -> str:
    """The platform's run id: <collection>-<task>--<trajectory_id>."""
    return f"{record.collection}-{record.task}--{record.trajectory_id}"


class RunAccepted(BaseModel):
    workflow_id: str
    trajectory_id: str
    status: RunStatus


class RunPublic(RunRecord):
    """The run record as the API serves it."""

    workflow_id: str

    @classmethod
    def of(cls, record: RunRecord) -> RunPublic:
        return cls(**record.model_dump(), workflow_id=workflow_id(record))


class TrajectoryPage(BaseModel):
    trajectories: list[RunPublic]
    total: int
    page: int
    limit: int
    has_more: bool


class StatusUpdate(RootModel[dict[str, Literal["cancelled"]]]):
    """{"<trajectory_id>": "cancelled", ...}: the runs to cancel."""


class StatusResult(RootModel[dict[str, RunStatus]]):
    """Each run's status after the request: cancelled, or how it had already ended."""


def multipart_schema() -> dict[str, Any]:
    """OpenAPI schema of the multipart form of a run."""
    return {
        "type": "object",
        "properties": {
            "init_params": {"type": "string", "description": "a JSON object, as in RunCreate"},
            "secret_params": {"type": "string", "description": "a JSON object of strings"},
            "webhook_url": {"type": "string"},
            "webhook_secret": {"type": "string"},
            "files": {
                "type": "array",
                "items": {"type": "string", "format": "binary"},
                "description": "attached to the run (/app/assets; zips are extracted)",
            },
        },
    }
