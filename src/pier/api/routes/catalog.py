"""What this server offers: the activities a workflow step may use (step
templates, each with its config schema), and the trial keys."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from pier.api.auth import CallerDep, CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.errors import NotFoundError
from pier.lifecycle.trial import TrialStatus
from pier.tasks.model import ACTIVITIES, ACTIVITY_DESCRIPTIONS

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


class StepTemplate(BaseModel):
    name: str
    activity: str
    description: str
    config_schema: dict[str, Any]


def _template(name: str) -> StepTemplate:
    return StepTemplate(
        name=name,
        activity=name,
        description=ACTIVITY_DESCRIPTIONS.get(name, ""),
        config_schema=ACTIVITIES[name].model_json_schema(),
    )


@router.get("/step-templates", tags=["workflows"], summary="The activities pier runs")
def list_step_templates(_caller: CallerDep) -> list[StepTemplate]:
    return [_template(name) for name in sorted(ACTIVITIES)]


@router.get("/step-templates/{name}", tags=["workflows"], summary="One activity and its config schema")
def get_step_template(name: str, _caller: CallerDep) -> StepTemplate:
    if name not in ACTIVITIES:
        known = ", ".join(sorted(ACTIVITIES))
        raise NotFoundError(f"no step template {name!r}: pier runs these activities: {known}")
    return _template(name)


@router.get("/trial/{collection}", tags=["trial"], summary="The collection's trial-key budget")
def trial_status(collection: CollectionDep, state: StateDep) -> TrialStatus:
    return state.dispatcher.trials.status(collection)


@router.post("/trial/{collection}/activate", tags=["trial"], summary="Activate the trial keys")
def activate_trial(collection: CollectionDep, state: StateDep) -> TrialStatus:
    """422 saying so when the server has no trial keys."""
    return state.dispatcher.trials.activate(collection)
