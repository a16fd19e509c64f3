"""The platform's chat-completions endpoint in runbook mode: a request whose
`jetty` block asks for a runbook becomes an ordinary run of the named task,
the `system` message as its runbook, template variables substituted by the
server (never read from the user's message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pier.lifecycle.plan import task_from_text
from pier.names import check_task_name
from pier.record import Trajectory
from pier.server.auth import Caller
from pier.server.dispatcher import RunParams
from pier.server.errors import invalid
from pier.server.services.inputs import refuse_nul
from pier.server.state import ApiState

# The jetty block's fields that become the run's init_params, by their names there.
PARAMS = {"agent": "agent", "model_provider": "model_provider", "snapshot": "snapshot"}


@dataclass(frozen=True)
class RunbookRequest:
    collection: str
    task: str
    runbook: str
    init_params: dict[str, Any]
    secret_params: dict[str, str]
    use_trial_keys: bool


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def runbook_request(caller: Caller, model: str | None, messages: list[dict[str, Any]],
                    jetty: dict[str, Any]) -> RunbookRequest:  # fmt: skip
    """What a runbook-mode request asks for; a 422 naming the field it gets wrong."""
    refuse_nul({"model": model, "messages": messages, "jetty": jetty})
    collection = jetty.get("collection")
    if not isinstance(collection, str) or not collection:
        raise invalid("jetty.collection", "name the collection the run belongs to")
    caller.check(collection)
    task = jetty.get("task")
    if not isinstance(task, str) or not task:
        raise invalid("jetty.task", "name the task the run is filed under")
    check_task_name(task)
    system = [text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    if not system or not system[0].strip():
        raise invalid("messages", "runbook mode takes the runbook as the first `system` message's content")
    user = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    runbook = system[0]
    request = "\n\n".join(u for u in user if u.strip())
    if request:  # the user's message is the agent's request, after the runbook; never its variables
        runbook = f"{runbook.rstrip()}\n\n## Request\n\n{request}\n"
    params: dict[str, Any] = {}
    for field, key in PARAMS.items():
        if jetty.get(field) is not None:
            if not isinstance(jetty[field], str):
                raise invalid(f"jetty.{field}", "must be a string")
            params[key] = jetty[field]
    if model:
        params["model"] = model
    variables = jetty.get("template_variables") or {}
    if not isinstance(variables, dict):
        raise invalid("jetty.template_variables", "must be an object of variable -> value")
    variables = {k: v for k, v in variables.items() if k != "results_dir"}  # always /app/results in pier
    if variables:
        params["vars"] = {k: v if isinstance(v, str) else str(v) for k, v in variables.items()}
    for field in ("file_paths", "files"):
        value = jetty.get(field)
        if value is not None:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise invalid(f"jetty.{field}", "must be a list of strings")
            params[field] = value
    secrets = jetty.get("secret_params") or {}
    if not isinstance(secrets, dict) or not all(isinstance(v, str) for v in secrets.values()):
        raise invalid("jetty.secret_params", "must be an object of name -> string value")
    return RunbookRequest(collection, task, runbook, params, secrets, bool(jetty.get("use_trial_keys")))


def start(state: ApiState, request: RunbookRequest) -> Trajectory:
    """Accept the run as /api/v1/run does (checks, quotas, fair shares)."""
    task = task_from_text(request.runbook, state.settings, request.task)
    if "vars" in request.init_params:  # the runbook's own defaults stay for the variables not given
        request.init_params["vars"] = {**(task.init_params.get("vars") or {}), **request.init_params["vars"]}
    params = RunParams(request.init_params, request.secret_params, use_trial_keys=request.use_trial_keys)
    return state.dispatcher.accept_task(request.collection, request.task, task, params)


def final_message(record: Trajectory) -> str:
    """The last message of a runbook-mode answer: the run, how it ended, its outputs."""
    lines = [f"Run {record.trajectory_id} of {record.collection}/{record.name} {record.status.value}"
             + ("" if record.success is None else f" (success: {str(record.success).lower()})") + "."]  # fmt: skip
    if record.error:
        lines.append(f"Error: {record.error}")
    outputs = record.outputs
    if outputs.primary_files:
        lines.append("Primary outputs: " + ", ".join(outputs.primary_files))
    if outputs.results_files:
        lines.append("Results: " + ", ".join(f.key or f.path for f in outputs.results_files))
    lines.append(
        f"Trajectory: /api/v1/db/trajectory/{record.collection}/{record.name}/{record.trajectory_id}"
    )
    return "\n".join(lines)
