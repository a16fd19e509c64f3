"""Task bodies: the task JSON in (or a runbook's text), TaskPublic out."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from pier.tasks.model import Task


class TaskPublic(BaseModel):
    collection: str
    name: str
    task: Task
    created_at: datetime
    updated_at: datetime


class TaskList(BaseModel):
    tasks: list[str]
