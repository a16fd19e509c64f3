"""A task checked on the way in (API PUT, `pier task push`): the model, then what a
run would need of it (a runbook that parses, an agent pier has), so that a bad
task is refused when it is stored, not when it is run."""

from __future__ import annotations

from typing import Any

from pier.agents import get_agent
from pier.errors import InputError
from pier.runbook.parse import parse
from pier.storage.local import check_name
from pier.tasks.build import infer_agent, task_from_runbook
from pier.tasks.model import Task
from pier.tasks.resolve import resolve


def checked_task(task: Task) -> Task:
    """task, if it can be run; InputError (TaskError, RunbookError) naming what is wrong."""
    step = resolve(task, {})
    get_agent(step.agent or infer_agent(step.model))
    return task


def task_from_json(data: Any) -> Task:
    """pydantic ValidationError names the bad field; InputError for the rest."""
    return checked_task(Task.model_validate(data))


def task_from_text(text: str, name: str = "runbook") -> Task:
    return checked_task(task_from_runbook(parse(text, path=name)))


MAX_NAME = 128


def task_name(name: str) -> str:
    if len(name) > MAX_NAME:
        raise InputError(f"task name is {len(name)} characters long: use at most {MAX_NAME}")
    return check_name("task", name)
