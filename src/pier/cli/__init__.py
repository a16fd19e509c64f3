"""`pier`: run runbooks, look at runs, keep the machine clean."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from pier.cli.audit import register as register_audit_command
from pier.cli.console import emit, err, fail, out, refusals, run_id, show_list, terminal_safe
from pier.cli.sandbox import register as register_sandbox_commands
from pier.cli.serve import register as register_api_commands
from pier.cli.storage import register as register_storage_commands
from pier.cli.summary import show_summary, validation_message
from pier.errors import InputError, NotFoundError, PierError

if TYPE_CHECKING:

    from pier.lifecycle.service import RunRequest, Services
    from pier.record import Trajectory
    from pier.tasks import ResolvedStep

# Start-up: this module is imported by every `pier` call, `pier --help` included,
# so it imports only typer and pier.errors; each command imports what it needs
# (SQLAlchemy, pydantic models, the docker SDK, rich) in its body.
# tests/unit/cli/test_cli_imports.py keeps it that way. Help and usage errors are
# click's plain text (rich_markup_mode=None on every command group): typer's rich
# formatting alone costs more than the rest of `pier --help`.


def _no_type_for_flags() -> None:
    """typer's help shows `<bool>` after every flag, as if it took a value: a
    flag's type column is left empty (an option that takes a value keeps it)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


_no_type_for_flags()
app = typer.Typer(
    help="pier: run AI agents on runbooks in isolated sandboxes.", no_args_is_help=True, rich_markup_mode=None
)
snapshot_app = typer.Typer(
    help="Named, prebuilt sandbox images.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(snapshot_app, name="snapshot")


@app.callback()
def _private_files() -> None:
    """Everything pier creates (under PIER_HOME: the database, storage, scratch,
    keys) is its owner's alone: 0600 files, 0700 folders (pier.settings.PRIVATE_UMASK)."""
    os.umask(0o077)


def secret_env(step: ResolvedStep, environ: Mapping[str, str]) -> dict[str, str]:
    """Only the host variables the runbook's secrets and the agent's providers name
    (keys, endpoints), never the whole environment: the same choice the API makes."""
    from pier.lifecycle.sandbox_env import wanted_names

    return {key: environ[key] for key in wanted_names(step) if key in environ}


@app.command("run")
def run_command(
    path: Annotated[Path, typer.Argument(help="a RUNBOOK.md, or a folder holding one")],
    var: Annotated[
        list[str], typer.Option("--var", metavar="NAME=VALUE", help="fills {{NAME}}; repeat for more")
    ] = [],  # noqa: B006
    file: Annotated[
        list[Path],
        typer.Option("--file", metavar="PATH", help="attach a file (zips are extracted); repeat for more"),
    ] = [],  # noqa: B006
    agent: Annotated[str | None, typer.Option(help="override the runbook's agent")] = None,
    snapshot: Annotated[str | None, typer.Option(help="snapshot name ('' for none)")] = None,
    image: Annotated[str | None, typer.Option(help="image ref (use with --snapshot '')")] = None,
    timeout: Annotated[int | None, typer.Option(help="agent time limit, seconds")] = None,
    cpus: Annotated[float | None, typer.Option(help="CPUs for the sandbox")] = None,
    memory: Annotated[str | None, typer.Option(help="memory for the sandbox, e.g. 8G")] = None,
    no_network: Annotated[bool, typer.Option("--no-network", help="no outbound network")] = False,
    collection: Annotated[str, typer.Option(help="collection the run belongs to")] = "local",
    as_json: Annotated[bool, typer.Option("--json", help="print only the run record as JSON")] = False,
    allow_extra_vars: Annotated[
        bool, typer.Option("--allow-extra-vars", help="accept --var names the runbook has no variable for")
    ] = False,
    allow_unfilled_vars: Annotated[
        bool, typer.Option("--allow-unfilled-vars", help="leave variables with no value as written")
    ] = False,
    remote: Annotated[
        bool,
        typer.Option(
            "--remote", help="submit to the fleet (PIER_EXECUTOR=temporal): a `pier worker` runs it"
        ),
    ] = False,
) -> None:
    """Run a runbook end to end in a fresh sandbox."""
    from pydantic import ValidationError

    if remote:  # the files go to the fleet's storage, not as host paths
        _run_remote(
            lambda: build_request(
                path,
                var,
                [],
                agent,
                snapshot,
                image,
                timeout,
                cpus,
                memory,
                no_network,
                collection,
                allow=(allow_extra_vars, allow_unfilled_vars),
            ),
            file,
            as_json,
        )

    from pier.cli.progress import Progress
    from pier.lifecycle.interrupts import Interrupted, stop_signals_interrupt
    from pier.lifecycle.service import Services, preflight, run

    try:  # bad input, whatever finds it before a sandbox exists, is exit 2
        services = Services()
        request = build_request(
            path, var, file, agent, snapshot, image, timeout, cpus, memory, no_network, collection,
            allow=(allow_extra_vars, allow_unfilled_vars),
        )  # fmt: skip
        preflight(request, services.settings)
    except InputError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        raise fail(validation_message(exc)) from None
    end_orphans(services)
    # The run's own log says what happens; library warnings (a retried create)
    # would print again as raw log lines between the progress lines.
    library = logging.getLogger("pier")
    level = library.level
    library.setLevel(logging.ERROR)
    progress = None if as_json else Progress(err)
    record: Trajectory | None = None
    code = None
    try:
        with stop_signals_interrupt():  # Ctrl-C, kill, a closed terminal: the run is cancelled
            if progress:
                progress.start(request)
            record = run(services, request, progress.observer() if progress else None)
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    except Interrupted as exc:  # the runner has ended the run and deleted its sandbox
        record, code = _stored(services, request.trajectory_id), exc.exit_code
    finally:
        library.setLevel(level)
        if progress:
            with contextlib.suppress(OSError):  # the terminal went away (SIGHUP)
                progress.stop()
    with contextlib.suppress(OSError):  # the terminal went away: the record is saved all the same
        if record is not None and as_json:
            print(record.model_dump_json(indent=2))
        elif record is not None:
            show_summary(record, services.storage.where(record.storage_path))
    raise typer.Exit(code if code is not None else 0 if record and record.success else 1)


def _run_remote(build: Callable[[], RunRequest], files: list[Path], as_json: bool) -> NoReturn:
    """`pier run --remote` (see pier.cli.remote): the same input errors, exit codes and output."""
    from pier.cli.remote import run_remote

    with refusals():
        code = run_remote(build, files, as_json)
    raise typer.Exit(code)


def _stored(services: Services, trajectory_id: str) -> Trajectory | None:
    """The run as stored, or None when it was interrupted before it was stored."""
    try:
        return services.store.get_run(trajectory_id)
    except NotFoundError:
        return None


def end_orphans(services: Services, remove_sandboxes: bool = True) -> None:
    """End the runs whose `pier` process is gone (killed), and remove what they left.
    Every command that looks at runs does this first, so none stays `running` forever."""
    from pier.lifecycle.orphans import end_orphaned_runs

    backend = (lambda: services.backend) if remove_sandboxes else None
    try:
        ended = end_orphaned_runs(services.store, services.settings, backend)
    except PierError as exc:
        err.print(f"[yellow]warning:[/yellow] could not check for abandoned runs: {exc}", highlight=False)
        return
    for record in ended:
        message = record.error or "its process is gone"
        err.print(f"[yellow]ended run {record.trajectory_id}:[/yellow] {message}", highlight=False)


def build_request(
    path: Path,
    var: list[str],
    files: list[Path],
    agent: str | None,
    snapshot: str | None,
    image: str | None,
    timeout: int | None,
    cpus: float | None,
    memory: str | None,
    no_network: bool,
    collection: str,
    allow: tuple[bool, bool] = (False, False),
) -> RunRequest:
    """The run `pier run` asks for; `allow` is (--allow-extra-vars, --allow-unfilled-vars)."""
    from pydantic import ValidationError

    from pier.cli.options import parse_vars
    from pier.lifecycle.service import RunRequest
    from pier.runbook import load
    from pier.settings import get_settings
    from pier.tasks import resolve, step_override, task_from_runbook

    runbook = load(path)
    task = task_from_runbook(runbook, get_settings().default_snapshot)
    try:
        step = step_override(
            task.run_step(),
            timeout_sec=timeout,
            cpus=cpus,
            memory=memory,
            network_enabled=False if no_network else None,
        )
    except ValidationError as exc:
        raise InputError(validation_message(exc)) from None
    task = task.model_copy(update={"step_configs": {"run": step}})
    params: dict = {}
    if var:
        params["vars"] = {**task.init_params.get("vars", {}), **parse_vars(var)}
    if files:
        params["file_paths"] = [str(f.expanduser().resolve()) for f in files]
    for key, value in (("agent", agent), ("snapshot", snapshot), ("image", image)):
        if value is not None:
            params[key] = value
    for key, allowed in zip(("allow_extra_vars", "allow_unfilled_vars"), allow, strict=True):
        if allowed:  # unset otherwise: PIER_ALLOW_* decides
            params[key] = True
    if image is not None and snapshot is None:
        params["snapshot"] = ""  # an image given on the command line is meant to be used
    folder = Path(runbook.path or path).resolve().parent
    env = secret_env(resolve(task, params), os.environ)
    return RunRequest(
        collection=collection,
        task_name=_slug(folder.name or "runbook"),
        task=task,
        run_params=params,
        env=env,
        source_dir=folder,  # local check sources are relative to the runbook
    )


def _slug(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-.")
    return cleaned or "runbook"


@app.command("runs")
def runs_command(
    limit: Annotated[int, typer.Option(help="how many")] = 20,
    collection: Annotated[str | None, typer.Option(help="only this collection")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON run record per line")] = False,
) -> None:
    """Recent runs, newest first."""
    from pier.lifecycle.services import Services

    services = Services()
    end_orphans(services)
    records, total = services.store.list_runs(collection=collection, limit=limit)
    show_list(RUNS_COLUMNS, [_run_row(r) for r in records], as_json, records)
    if not as_json and out.is_terminal:
        out.print(f"{len(records)} of {total} run(s)")


RUNS_COLUMNS = ("run", "collection/task", "status", "success", "created", "duration")


def _run_row(r: Trajectory) -> list[str]:
    return [
        r.trajectory_id,
        f"{r.collection}/{r.task}",
        r.status.value,
        "" if r.success is None else ("yes" if r.success else "no"),
        local_time(r.created),
        f"{r.duration_seconds:.1f}s" if r.duration_seconds is not None else "",
    ]


def local_time(moment: datetime) -> str:
    """This machine's local time with its UTC offset (stored times are UTC, and a
    time without its zone is ambiguous to whoever reads it elsewhere)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone().isoformat(sep=" ", timespec="seconds")


@app.command("logs")
def logs_command(
    trajectory_id: Annotated[str, typer.Argument(help="the run's trajectory id, or its first characters")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing until the run ends")] = False,
) -> None:
    """A run's log, from the start."""
    from pier.lifecycle.orphans import end_orphaned_runs, owner_gone
    from pier.lifecycle.services import Services

    services = Services()
    end_orphans(services)
    store = services.store
    trajectory_id = run_id(store, trajectory_id)
    seq = 0
    while True:
        for event in store.events(trajectory_id, after_seq=seq):
            if not emit(f"[{event.stage or '-'}] {terminal_safe(event.line)}"):
                return  # the reader is gone (`| head`)
            seq = event.seq
        if not follow:
            return
        record = store.get_run(trajectory_id)
        if record.status.terminal and not store.events(trajectory_id, after_seq=seq, limit=1):
            return
        if not record.status.terminal and owner_gone(record):
            # Nobody will finish it: end it now, saying why (the line is printed next).
            end_orphaned_runs(store, services.settings, lambda: services.backend, judge=owner_gone)
            continue
        time.sleep(0.3)


@app.command("sweep")
def sweep_command(
    images: Annotated[
        bool, typer.Option("--images", help="also remove agent layers no run used for --older-than")
    ] = False,
    older_than: Annotated[str, typer.Option(help="with --images: unused this long (30m, 12h, 7d)")] = "7d",
) -> None:
    """Delete sandboxes that crashed or abandoned runs left behind.

    With --images, also the agent layers no run used for --older-than."""
    from pier.lifecycle.services import Services
    from pier.sandbox.sweeper import sweep

    if images:
        from pier.cli.layers import parse_age

        with refusals():
            parse_age(older_than)  # bad input before anything is removed

    services = Services()
    end_orphans(services, remove_sandboxes=False)  # the sweep removes them: their runs have ended
    try:
        removed = sweep(services.backend, run_status_lookup(services))
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    for item in removed:
        out.print(f"removed {item.id[:12]} (run {item.trajectory_id}): {item.reason}", highlight=False)
    out.print(f"{len(removed)} sandbox(es) removed")
    if images:
        from pier.cli.layers import prune_layers

        with refusals():
            prune_layers(services.backend, older_than)


def run_status_lookup(services: Services):
    def status(trajectory_id: str) -> str | None:
        try:
            return services.store.get_run(trajectory_id).status.value
        except NotFoundError:
            return None

    return status


@app.command("validate")
def validate_command(
    paths: Annotated[list[Path], typer.Argument(help="runbook files or folders (searched recursively)")],
) -> None:
    """Parse, render and plan runbooks without running them; exit 1 when any has an error."""
    from pier.cli.lint import validate_paths

    errors = validate_paths(paths, out)
    raise typer.Exit(1 if errors else 0)


@snapshot_app.command("list")
def snapshot_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Snapshots pier knows: built-in and from snapshots.yaml."""

    from pier.lifecycle.services import Services
    from pier.sandbox.snapshots import SnapshotCatalog

    services = Services()
    try:
        entries = SnapshotCatalog(services.settings).list(services.backend)
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    rows = [[e.name, e.kind, "yes" if e.built else "no", e.description or ""] for e in entries]
    items = [
        {"name": e.name, "kind": e.kind, "built": e.built, "description": e.description} for e in entries
    ]
    show_list(("name", "kind", "built", "description"), rows, as_json, items)


@snapshot_app.command("layers")
def snapshot_layers() -> None:
    """Agent layers: images with a pinned agent CLI, built once, reused."""
    from pier.cli.layers import show_layers
    from pier.sandbox import get_backend
    from pier.settings import get_settings

    with refusals():
        show_layers(get_backend(get_settings()))


@snapshot_app.command("build")
def snapshot_build(name: Annotated[str, typer.Argument(help="snapshot name")]) -> None:
    """Build (or find cached) the snapshot's image."""
    from pier.lifecycle.services import Services
    from pier.sandbox.snapshots import SnapshotCatalog

    services = Services()
    try:
        snapshot = SnapshotCatalog(services.settings).get(name)
        if snapshot is None:
            raise NotFoundError(f"no snapshot named '{name}': see `pier snapshot list`")
        source = snapshot.source()
        ref = services.backend.ensure_image(
            source,
            lambda line: err.print(line, highlight=False, markup=False),
            services.settings.create_timeout_sec,
        )
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    out.print(f"{name}: {ref}")


register_api_commands(app)  # serve, collection, task, routine
register_sandbox_commands(app)  # sandbox check
register_storage_commands(app)  # storage where, storage migrate
register_audit_command(app)  # audit


def main() -> None:  # pragma: no cover
    app(prog_name="pier")
