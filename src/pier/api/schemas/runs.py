"""Run bodies: RunCreate in, WorkflowResponse / Trajectory / TrajectoryPage out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, RootModel

from pier.record import RUN_STEP, RunStatus, Trajectory
from pier.server.models import SUBSCRIPTION_CREDENTIALS
from pier.server.models import RunCreate as RunCreate
from pier.server.models import SecretParams as SecretParams


class WorkflowResponse(BaseModel):
    """What the run routes answer: the run's ids and status, and its trajectory
    as it is now (pending for /run, ended for /run-sync)."""

    message: str
    workflow_id: str
    trajectory_id: str
    status: RunStatus
    result: dict[str, Any] = Field(description="the run step's outputs")
    trajectory: Trajectory
    metadata: str = Field(description="storage key of the run's run.json")

    @classmethod
    def of(cls, record: Trajectory, message: str) -> WorkflowResponse:
        return cls(
            message=message,
            workflow_id=record.workflow_id,
            trajectory_id=record.trajectory_id,
            status=record.status,
            result=record.outputs.model_dump(mode="json") if RUN_STEP in record.steps else {},
            trajectory=record,
            metadata=record.metadata_uri,
        )


class TrajectoryPage(BaseModel):
    trajectories: list[Trajectory]
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
            "use_trial_keys": {"type": "boolean"},
            "subscription_credential": {"type": "string", "enum": list(SUBSCRIPTION_CREDENTIALS)},
            "files": {
                "type": "array",
                "items": {"type": "string", "format": "binary"},
                "description": "attached to the run (/app/assets; zips are extracted)",
            },
        },
    }
