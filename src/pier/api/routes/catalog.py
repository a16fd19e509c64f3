"""What this server offers: the activities a workflow step may use (step
templates, each with its config schema; no token needed, as on the platform,
whose references list them with a bare curl), and the trial keys."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from pier.api.auth import CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.errors import NotFoundError
from pier.policies.trial import TrialStatus
from pier.tasks.workflow import ACTIVITIES, CATEGORIES, config_schema, known_activities

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)


class StepTemplate(BaseModel):
    """One activity: the platform's fields (activity_name, category,
    parameters) and pier's (name, activity, config_schema)."""

    name: str
    activity: str
    activity_name: str
    category: str
    description: str
    config_schema: dict[str, Any]
    parameters: list[dict[str, Any]]


class StepTemplates(BaseModel):
    """The platform's shape: `{templates, categories, total_count}`."""

    templates: list[StepTemplate]
    categories: list[str]
    total_count: int


def _template(name: str) -> StepTemplate:
    activity = ACTIVITIES[name]
    schema = config_schema(activity)
    required = set((activity.params.model_json_schema() if activity.params else schema).get("required", []))
    parameters = [
        {"name": key, "required": key in required, "path_parameter": f"{key}_path" if activity.params else None,
         **{k: v for k, v in prop.items() if k in ("type", "description", "default", "anyOf", "enum")}}
        for key, prop in schema.get("properties", {}).items()
        if key != "activity" and not (activity.params and key.endswith("_path") and key[:-5] in activity.params.model_fields)
    ]  # fmt: skip
    return StepTemplate(
        name=name,
        activity=name,
        activity_name=name,
        category=activity.category,
        description=activity.description,
        config_schema=schema,
        parameters=parameters,
    )


@router.get("/step-templates", tags=["workflows"], summary="The activities pier runs")
def list_step_templates() -> StepTemplates:
    templates = [_template(name) for name in ACTIVITIES]
    return StepTemplates(templates=templates, categories=list(CATEGORIES), total_count=len(templates))


@router.get("/step-templates/{name}", tags=["workflows"], summary="One activity and its config schema")
def get_step_template(name: str) -> StepTemplate:
    if name not in ACTIVITIES:
        raise NotFoundError(f"no step template {name!r}: pier runs these activities: {known_activities()}")
    return _template(name)


@router.get("/trial/{collection}", tags=["trial"], summary="The collection's trial-key budget")
def trial_status(collection: CollectionDep, state: StateDep) -> TrialStatus:
    return state.dispatcher.trials.status(collection)


@router.post("/trial/{collection}/activate", tags=["trial"], summary="Activate the trial keys")
def activate_trial(collection: CollectionDep, state: StateDep) -> TrialStatus:
    """422 saying so when the server has no trial keys."""
    return state.dispatcher.trials.activate(collection)
