"""`pier task ...`: a collection's stored tasks on the server's own store, from the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.console import audited, out, refusals, show_list

task_app = typer.Typer(
    help="Tasks: named, stored workflows of a collection.", no_args_is_help=True, rich_markup_mode=None
)


@task_app.command("list")
def task_list(
    collection: Annotated[str, typer.Option(help="the collection whose tasks to list")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """A collection's stored tasks, with their agent and model."""
    from pier.lifecycle.start import Services

    services = Services()
    with refusals():
        services.store.get_collection(collection)
        found = services.store.list_tasks(collection)
    rows = [[t.name, *_agent_and_model(t.definition), t.description or ""] for t in found]
    show_list(("task", "agent", "model", "description"), rows, as_json, found, empty="no tasks")


def _agent_and_model(definition: dict) -> list[str]:
    params = definition.get("init_params") or {}
    return [str(params.get("agent") or ""), str(params.get("model") or "")]


@task_app.command("push")
def task_push(
    runbook: Annotated[Path, typer.Argument(help="a RUNBOOK.md, or a folder holding one")],
    collection: Annotated[str, typer.Option(help="the collection to store it in")],
    name: Annotated[str | None, typer.Option(help="the task's name; default the runbook's folder")] = None,
) -> None:
    """Store a runbook as a task (created or replaced), checked first."""
    from pier.lifecycle.plan import checked_task
    from pier.lifecycle.wiring import Services
    from pier.names import check_task_name
    from pier.runbook import load
    from pier.tasks import task_from_runbook

    services = Services()
    with refusals():
        loaded = load(runbook)
        task = checked_task(task_from_runbook(loaded, services.settings.default_snapshot), services.settings)
        label = check_task_name(name or Path(loaded.path or runbook).resolve().parent.name)
        services.store.get_collection(collection)
        with audited(services.store, "task push", collection, label):
            services.store.put_task(collection, label, task.model_dump(mode="json"))
    out.print(f"task {collection}/{label} stored", highlight=False)
