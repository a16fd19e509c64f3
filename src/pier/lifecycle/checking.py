"""check: run the plan's checks in the run's sandbox (checks_isolation: same) or in
a second sandbox from the same image that holds only the collected results and
assets (fresh), which is deleted whatever happens. Also the tools pre-flight of
set up and the `eval` summary of collect."""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from pier.checks import CheckOptions, ReportError, eval_summary, required_tools, run_checks
from pier.errors import StageError
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import Outcome
from pier.record import CheckResult
from pier.sandbox import create_with_retry
from pier.sandbox.base import Sandbox, SandboxSpec
from pier.sandbox.tarutil import FileTar

FRESH_DIRS = {"results": "/app/results", "assets": "/app/assets"}


def check_tools(ctx: RunContext) -> dict[str, str]:
    """The tools the plan's checks need (name -> why). Set up probes for them in the
    same exec as the sandbox's own tools: one round trip for both."""
    plan = ctx.require_plan()
    return dict(required_tools(plan.checks, plan.network))


def refuse_missing_check_tools(ctx: RunContext, missing: list[str]) -> None:
    """Before the agent starts: what the checks need is in the image. Raises StageError."""
    tools = check_tools(ctx)
    missing = [tool for tool in missing if tool in tools]
    if missing:
        needs = "; ".join(f"{tool}, which {tools[tool]}" for tool in missing)
        raise StageError(
            "setup",
            f"the image {ctx.image} has no {' and no '.join(missing)} ({needs}): add "
            f"{' and '.join(missing)} to the image; the agent was not started",
            Outcome.invalid,
        )


def record_eval(ctx: RunContext) -> None:
    """The runbook's own validation_report.json, summarised on the record."""
    try:
        ctx.record.outputs.eval = eval_summary(ctx.output_dir / "results")
    except ReportError as exc:
        ctx.record.outputs.warnings.append(str(exc))
        ctx.log(f"warning: {exc}")
        return
    if ctx.record.outputs.eval is not None:
        summary = ctx.record.outputs.eval
        ctx.log(f"validation_report.json: verdict {summary['verdict']}, stages {summary['checks']} passed")


def check_stage(ctx: RunContext, fresh_spec: Callable[[], SandboxSpec]) -> None:
    plan = ctx.require_plan()
    step = ctx.record.stage("check")
    if not plan.checks:
        step.detail = "no checks declared"
        return
    ctx.record.outputs.checks = []
    if plan.checks_isolation == "fresh":
        _in_fresh_sandbox(ctx, fresh_spec())
    else:
        _run(ctx, ctx.require_sandbox())
    if ctx.cancel.is_set():
        raise StageError("check", "the run was cancelled")
    checks = ctx.record.outputs.checks
    passed = sum(result.passed for result in checks)
    step.detail = f"{passed}/{len(checks)} checks passed"
    ctx.log(step.detail)


def _run(ctx: RunContext, sandbox: Sandbox) -> None:
    plan = ctx.require_plan()

    def on_result(result: CheckResult) -> None:
        ctx.record.outputs.checks.append(result)
        ctx.save_record(ctx.record)

    options = CheckOptions(
        network=plan.network,
        env=dict(ctx.backend.tls_env()),
        redact=ctx.redactor.text,
        log=ctx.log,
        stop=ctx.cancel.is_set,
        on_result=on_result,
        scratch=ctx.scratch(),
        policy=ctx.settings.outbound,
    )
    ctx.log(f"running {len(plan.checks)} check(s) in a clean shell")
    run_checks(sandbox, plan.checks, options)


def _in_fresh_sandbox(ctx: RunContext, spec: SandboxSpec) -> None:
    sandbox = create_with_retry(ctx.backend, spec, timeout=ctx.settings.create_timeout_sec)
    try:
        ctx.log(f"checks_isolation fresh: checks run in a second sandbox {sandbox.id[:12]}")
        for name, path in FRESH_DIRS.items():
            _copy_in(sandbox, ctx.output_dir / name, path)
        _run(ctx, sandbox)
    finally:
        sandbox.delete()
        ctx.log(f"check sandbox {sandbox.id[:12]} deleted")


def _copy_in(sandbox: Sandbox, folder: Path, dest: str) -> None:
    """folder's contents as dest in the sandbox (an empty dest when it was not
    collected), streamed from a temporary tar, never held in memory, and sent
    again whole after a transient engine error (a FileTar, not a generator)."""
    done = sandbox.exec(["mkdir", "-p", "--", dest], workdir="/", timeout=60)
    if not done.ok:
        raise StageError("check", f"could not create {dest} in the check sandbox: {done.output.strip()}")
    if not folder.is_dir():
        return
    with tempfile.TemporaryDirectory(prefix="pier-check-") as scratch:
        spool = Path(scratch) / "in.tar"
        with tarfile.open(spool, mode="w") as tar:
            for item in sorted(folder.iterdir()):
                tar.add(item, arcname=item.name)
        sandbox.put_archive(dest, FileTar(spool))
