"""Task bodies: the task JSON in (or a runbook's text), TaskPublic out; the
platform client's create and update bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pier.server.models import WORKFLOW_DOC as WORKFLOW_DOC
from pier.server.models import TaskUpdate as TaskUpdate
from pier.tasks.model import Task


class TaskPublic(BaseModel):
    collection: str
    name: str
    description: str
    workflow: Task
    created_at: datetime
    updated_at: datetime


class TaskCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    workflow: dict[str, Any] | str = Field(description=WORKFLOW_DOC)


class TaskDeleted(BaseModel):
    collection: str
    name: str
    deleted: bool = True
    message: str = "task deleted; its runs stay readable"
