"""check: run the plan's checks in the run's sandbox (checks_isolation: same) or in
a second sandbox from the same image that holds only the collected results and
assets (fresh), which is deleted whatever happens. Also the tools pre-flight of
set up and the `eval` summary of collect."""

from __future__ import annotations

import json
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from pier.checks import CheckOptions, ReportError, eval_summary, required_tools, run_checks
from pier.checks.report import REPORT_NAME, is_v2, merge_report, read_report
from pier.checks.runner import place_sources
from pier.checks.sources import FetchError, probe
from pier.errors import StageError
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import Outcome
from pier.lifecycle.plan import RunPlan
from pier.record import CheckResult
from pier.sandbox import create_with_retry
from pier.sandbox.base import Sandbox, SandboxSpec
from pier.sandbox.tarutil import FileTar
from pier.storage.files import describe

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


def probe_sources(ctx: RunContext) -> None:
    """Before any sandbox exists: every `code_checks.sources` entry answers, with its
    token, and has its ref, so a bad URL, a dead token or a missing ref fails the
    run before anything is paid for. Raises StageError."""
    plan = ctx.require_plan()
    for source in plan.code_checks.sources:
        try:
            probe(
                source.url,
                source.ref,
                _secret_of(plan, source.secret),
                ctx.settings.outbound,
                PROBE_TIMEOUT_SEC,
            )
        except FetchError as exc:
            raise StageError(
                "prepare",
                f"code_checks.sources {source.name}: {ctx.redactor.text(str(exc))}: fix its url, ref or secret; "
                "no sandbox was created",
            ) from None
        ctx.log(
            f"check source {source.name}: {source.url} answers"
            + (f", ref {source.ref}" if source.ref else "")
        )


PROBE_TIMEOUT_SEC = 60


def sources_before_agent(ctx: RunContext) -> None:
    """Under `code_checks.executor: agent` the agent runs the checks, so their sources
    are in /app/checks before it starts (cloned on the host: a source's token never
    enters the sandbox). Raises StageError."""
    plan = ctx.require_plan()
    if plan.code_checks.executor != "agent" or not plan.code_checks.sources:
        return
    unfetched = place_sources(ctx.require_sandbox(), _options(ctx))
    if unfetched:
        raise StageError("setup", f"{unfetched}; the agent was not started")


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
    agent_report, unreadable = read_report(ctx.output_dir / "results")
    platform = any(check.origin == "code_checks" for check in plan.checks) or is_v2(agent_report)
    if not plan.checks and not platform:
        step.detail = "no checks declared"
        return
    ctx.record.outputs.checks = []
    if any(check.runs_here for check in plan.checks):
        if plan.checks_isolation == "fresh":
            _in_fresh_sandbox(ctx, fresh_spec())
        else:
            _run(ctx, ctx.require_sandbox())
    if ctx.cancel.is_set():
        raise StageError("check", "the run was cancelled")
    if platform:  # pier's own `checks:` with a v1 report (or none) keep the v1 report as it is
        if unreadable:
            ctx.record.outputs.warnings.append(unreadable)
            ctx.log(f"warning: {unreadable}")
        merge_into_report(ctx, agent_report)
    checks = ctx.record.outputs.checks
    passed = sum(result.outcome == "pass" for result in checks)
    step.detail = f"{passed}/{len(checks)} checks passed"
    ctx.log(step.detail)


def merge_into_report(ctx: RunContext, agent_report: dict | None) -> None:
    """The evaluation report v2: pier's results merged into the agent's report,
    written back to the results (masked), summarised on the record as its `eval`;
    the record's checks become one per check, the agent's included."""
    plan = ctx.require_plan()
    merged = merge_report(
        agent_report,
        plan.checks,
        ctx.record.outputs.checks,
        strict=plan.strict_evaluation,
        evaluation=plan.evaluation,
    )
    for note in merged.notes:
        ctx.record.outputs.warnings.append(note)
        ctx.log(f"note: {note}")
    ctx.record.outputs.checks = merged.results
    results = ctx.output_dir / "results"
    results.mkdir(parents=True, exist_ok=True)
    path = results / REPORT_NAME
    path.write_text(ctx.redactor.text(json.dumps(merged.report, indent=2, ensure_ascii=False)) + "\n")
    _listed(ctx, path)
    ctx.record.outputs.eval = merged.summary()
    for result in merged.results:
        if result.runner == "agent":
            ctx.log(
                f"check {result.name} (the agent's): {result.outcome}"
                + (f": {result.message}" if result.message else "")
            )
    summary = ctx.record.outputs.eval
    ctx.log(f"{REPORT_NAME} (v2, merged): verdict {summary['verdict']}, {summary['checks']} entries passed")
    ctx.save_record(ctx.record)


def _listed(ctx: RunContext, path: Path) -> None:
    """The record's results list names the report at its new size (or names it, when
    pier wrote the first one)."""
    results = ctx.output_dir / "results"
    files = [f for f in ctx.record.outputs.results_files if f.path != REPORT_NAME]
    ctx.record.set_results([*files, describe(path, results)], list(ctx.record.outputs.primary_files))


def _run(ctx: RunContext, sandbox: Sandbox) -> None:
    plan = ctx.require_plan()
    ctx.log(f"running {sum(c.runs_here for c in plan.checks)} check(s) in a clean shell")
    run_checks(sandbox, plan.checks, _options(ctx))


def _options(ctx: RunContext) -> CheckOptions:
    plan = ctx.require_plan()

    def on_result(result: CheckResult) -> None:
        ctx.record.outputs.checks.append(result)
        ctx.save_record(ctx.record)

    return CheckOptions(
        network=plan.network,
        env=dict(ctx.backend.tls_env()),
        redact=ctx.redactor.text,
        log=ctx.log,
        stop=ctx.cancel.is_set,
        on_result=on_result,
        scratch=ctx.scratch(),
        policy=ctx.settings.outbound,
        secrets=plan.check_env,
        sources=[(source, _secret_of(plan, source.secret)) for source in plan.code_checks.sources],
    )


def _secret_of(plan: RunPlan, name: str | None) -> str | None:
    """The value of the secret a source names (declared under secrets:), if the run has it."""
    if name is None:
        return None
    decl = plan.secret_decls.get(name) or {}
    return plan.env.get(decl.get("env") or name)


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
