"""`pier run`: a runbook end to end in a fresh sandbox on this machine, or on
the fleet with --remote (pier.cli.remote)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from pier.cli.console import err, fail, refusals
from pier.cli.orphans import end_orphans
from pier.cli.summary import record_json, show_summary, validation_message
from pier.errors import InputError, NotFoundError, PierError

if TYPE_CHECKING:
    from pier.lifecycle.start import RunRequest, Services
    from pier.record import Trajectory
    from pier.tasks import ResolvedStep


def secret_env(step: ResolvedStep, environ: Mapping[str, str]) -> dict[str, str]:
    """Only the host variables the runbook's secrets and the agent's providers name
    (keys, endpoints), never the whole environment: the same choice the API makes."""
    from pier.lifecycle.sandbox_env import caller_env

    return caller_env(step, environ)


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
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="print only the run record as JSON: id, status, success, collection, "
            "task, created, duration_seconds, then the whole trajectory",
        ),
    ] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw", help="with --json: the platform's trajectory record only, as the API serves it"
        ),
    ] = False,
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
    keep: Annotated[
        bool,
        typer.Option(
            "--keep", help="keep the sandbox after the run, for PIER_KEEP_TTL_SEC (--continue-from)"
        ),
    ] = False,
    continue_from: Annotated[
        str | None,
        typer.Option(
            "--continue-from", metavar="RUN_ID", help="run in the kept sandbox of that run (see --keep)"
        ),
    ] = None,
) -> None:
    """Run a runbook end to end in a fresh sandbox."""
    from pydantic import ValidationError

    shape = "raw" if raw else "head" if as_json else None  # what --json prints (pier.cli.summary.record_json)
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
                session=(keep, continue_from),
            ),
            file,
            shape,
        )

    import atexit
    import gc

    # At exit, the collector need not walk every object the run loaded (0.4 to
    # 0.7 s of a `pier run` after its last line) while the interpreter shuts
    # down; the database is closed before that (below), as collecting it did.
    atexit.register(gc.freeze)

    from pier.lifecycle.start import Services, preflight

    try:  # bad input, whatever finds it before a sandbox exists, is exit 2
        services = Services()
        request = build_request(
            path, var, file, agent, snapshot, image, timeout, cpus, memory, no_network, collection,
            allow=(allow_extra_vars, allow_unfilled_vars), session=(keep, continue_from),
        )  # fmt: skip
        preflight(request, services.settings)
    except InputError as exc:
        raise fail(str(exc)) from None
    except ValidationError as exc:
        raise fail(validation_message(exc)) from None
    try:
        _run_here(services, request, shape)
    finally:  # every way out, an exit code or an error
        if "store" in services.__dict__:
            with contextlib.suppress(Exception):
                services.store.close()


def _run_here(services: Services, request: RunRequest, as_json: str | None) -> NoReturn:
    """The run, its live view and its summary; raises typer.Exit with its code."""
    import logging

    from pier.cli.progress import Progress
    from pier.lifecycle.interrupts import Interrupted, stop_signals_interrupt
    from pier.lifecycle.start import run
    from pier.sandbox.base import say_runtime

    end_orphans(services)
    say_runtime(lambda: services.backend, lambda line: err.print(line, highlight=False, markup=False))
    from pier.telemetry import tracing

    if tracing.configure("pier-run"):  # OTEL_EXPORTER_OTLP_*: a local run's trace goes out as a server's does
        import atexit

        atexit.register(tracing.shutdown)  # sends what is buffered before the process exits
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
            print(record_json(record, raw=as_json == "raw", indent=2))
        elif record is not None:
            show_summary(record, services.storage.where(record.storage_path))
    raise typer.Exit(code if code is not None else 0 if record and record.success else 1)


def _run_remote(build: Callable[[], RunRequest], files: list[Path], as_json: str | None) -> NoReturn:
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
    session: tuple[bool, str | None] = (False, None),
) -> RunRequest:
    """The run `pier run` asks for; `allow` is (--allow-extra-vars, --allow-unfilled-vars),
    `session` (--keep, --continue-from)."""
    from pydantic import ValidationError

    from pier.cli.options import parse_vars
    from pier.lifecycle.start import RunRequest
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
    keep, continue_from = session
    if keep:
        params["keep_sandbox"] = True
    if continue_from:
        params["continue_from"] = continue_from
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
