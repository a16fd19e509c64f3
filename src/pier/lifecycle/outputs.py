"""collect: copy /logs/agent, /app/results and /app/assets out of the sandbox into
the run's storage folder, and describe the results (primary outputs first)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pier.errors import StageError
from pier.lifecycle.context import RunContext
from pier.sandbox.base import Sandbox
from pier.sandbox.tarutil import extract_stream
from pier.storage.files import describe

OUTPUT_DIRS = {"logs": "/logs/agent", "results": "/app/results", "assets": "/app/assets"}


def collect_outputs(ctx: RunContext) -> None:
    archives = open_archives(ctx.require_sandbox(), list(OUTPUT_DIRS.values()))
    try:
        for name, path in OUTPUT_DIRS.items():
            try:
                extract_stream(archives[path](), ctx.output_dir / name)
            except FileNotFoundError:
                ctx.log(f"{path} does not exist in the sandbox")
    finally:  # the logs are stored even when a later folder fails to come out
        _close_all(archives)
        _redact_logs(ctx, ctx.output_dir / "logs")
    results = ctx.output_dir / "results"
    files = sorted(p for p in results.rglob("*") if p.is_file()) if results.is_dir() else []
    _describe(ctx, results, files)
    if not files:
        raise StageError(
            "collect",
            "the agent finished with nothing in /app/results: results are the run's contract, "
            "so have the runbook write its deliverables to {{results_dir}}",
        )
    ctx.log(f"collected {len(files)} result file(s)")


def open_archives(sandbox: Sandbox, paths: list[str]) -> dict[str, Callable[[], Iterator[bytes]]]:
    """Ask for every folder's archive at once, then read them one by one: the
    engine prepares them in parallel, so collect waits about one round trip, not
    one per folder. Each value gives that folder's stream, or raises what
    get_archive raised (FileNotFoundError when the folder is missing)."""
    pool = ThreadPoolExecutor(len(paths), thread_name_prefix="pier-collect")
    futures = {path: pool.submit(sandbox.get_archive, path) for path in paths}
    pool.shutdown(wait=False)
    return {path: future.result for path, future in futures.items()}


def _close_all(archives: dict[str, Callable[[], Iterator[bytes]]]) -> None:
    """Release the streams not read to their end (a failure midway)."""
    for opened in archives.values():
        try:
            stream = opened()
        except Exception:  # it failed to open: nothing to release
            continue
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _redact_logs(ctx: RunContext, logs: Path) -> None:
    if not ctx.redactor or not logs.is_dir():
        return
    for file in logs.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            clean = ctx.redactor.bytes(data)
            if clean != data:
                file.write_bytes(clean)


def _describe(ctx: RunContext, results: Path, files: list[Path]) -> None:
    plan = ctx.require_plan()
    described = {str(f.relative_to(results)): describe(f, results) for f in files}
    primary = [p for p in plan.primary_outputs if p in described]
    for missing in (p for p in plan.primary_outputs if p not in described):
        ctx.log(f"warning: primary output {missing} was not produced")
    ordered = primary + [p for p in described if p not in primary]
    ctx.record.primary_files = primary
    ctx.record.results_files = [described[p] for p in ordered]
