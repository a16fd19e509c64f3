"""Running checks in a sandbox, one after another, each in a clean shell (`env -i`
with a minimal PATH/HOME/LANG and the CA variables: none of the agent's
environment), in /app, within its own time limit, with its output bounded."""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pier.checks.model import Check, CodeCheck, CommandCheck, InvalidCheck, program_spec
from pier.checks.platform import Source
from pier.checks.sources import (
    CHECKS_ROOT,
    GIT_CLEAN_ENV,
    FetchError,
    clones_in_sandbox,
    fetch_on_host,
    sandbox_clone_command,
)
from pier.errors import StageError
from pier.outbound import OutboundPolicy
from pier.record import CheckResult
from pier.sandbox.base import ExecResult, Sandbox

# Not /run/pier: clean up deletes that before checks; this is written after.
PROGRAM_DIR = "/run/pier-checks"
PROGRAM_PATH = f"{PROGRAM_DIR}/program.py"
RESULTS_DIR = "/app/results"
# What a `## Code Checks` command check finds in its environment (the platform's names).
COMMAND_ENV = {"RESULTS_DIR": RESULTS_DIR, "CHECKS_DIR": CHECKS_ROOT, "ASSETS_DIR": "/app/assets"}
# Exit codes of a command the shell could not run (not executable, not found): `error`.
CANNOT_RUN = (126, 127)
OUTPUT_LIMIT = 64 * 1024  # bytes of a check's output kept (the last ones)
SETUP_TIMEOUT_SEC = 60


@dataclass(frozen=True)
class CheckOptions:
    network: bool  # whether the sandbox can clone a git source itself
    env: Mapping[str, str] = field(default_factory=dict)  # the clean shell's extra variables (CA paths)
    redact: Callable[[str], str] = lambda text: text
    log: Callable[[str], None] = lambda _line: None
    stop: Callable[[], bool] = lambda: False  # asked between checks (a cancel)
    on_result: Callable[[CheckResult], None] = lambda _result: None
    scratch: Path | None = None  # where sources fetched on the host go (default: the system's temp)
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)  # where host fetches may connect
    # The secrets the agent received (and those exposed to checks): a command check's environment.
    secrets: Mapping[str, str] = field(default_factory=dict)
    # `code_checks.sources`, cloned to /app/checks/<name> before the command checks run,
    # each with the value of the secret it names (sent as git's HTTP auth, never in the sandbox).
    sources: Sequence[tuple[Source, str | None]] = ()


def run_checks(sandbox: Sandbox, checks: Sequence[Check], options: CheckOptions) -> list[CheckResult]:
    """Every check's result, in order. A failing or broken check is a result, never
    an exception; SandboxError propagates when the sandbox itself is gone."""
    checks = [check for check in checks if check.runs_here]
    prepare_sandbox(sandbox, checks)
    unfetched = place_sources(sandbox, options) if any(c.origin == "code_checks" for c in checks) else None
    results: list[CheckResult] = []
    for check in checks:
        if options.stop():
            break
        if unfetched and check.origin == "code_checks" and not isinstance(check, InvalidCheck):
            result = _result(check, None, f"error: {unfetched}", time.monotonic(), options)
        else:
            result = run_one(sandbox, check, options)
        results.append(result)
        options.on_result(result)
        options.log(summary_line(result))
    return results


def prepare_sandbox(sandbox: Sandbox, checks: Sequence[Check]) -> None:
    """An empty /app/checks (whatever the agent put there, even a link, goes) and
    the built-in program. Every agent process has been stopped by now, so nothing
    can change either before the checks read them."""
    setup = f"rm -rf -- {CHECKS_ROOT} {PROGRAM_DIR} && mkdir -p -- {CHECKS_ROOT} {PROGRAM_DIR}"
    done = sandbox.exec(setup, workdir="/", timeout=SETUP_TIMEOUT_SEC)
    if not done.ok:
        raise StageError(
            "check", f"could not prepare {CHECKS_ROOT} in the sandbox: {done.output.strip()[-500:]}"
        )
    if any(check.builtin for check in checks):
        sandbox.put_files(PROGRAM_DIR, {"program.py": program_source()}, mode=0o644)


def program_source() -> bytes:
    return resources.files("pier.checks").joinpath("program.py").read_bytes()


def place_sources(sandbox: Sandbox, options: CheckOptions) -> str | None:
    """Every `code_checks.sources` entry in /app/checks/<name>; what went wrong, or None."""
    for source, secret in options.sources:
        stand_in = CodeCheck(name=source.name, type="code", source=source.url, ref=source.ref, run="true")
        try:
            with tempfile.TemporaryDirectory(prefix="pier-check-", dir=options.scratch) as tmp:
                tree = fetch_on_host(stand_in, Path(tmp), timeout=SOURCE_TIMEOUT_SEC, policy=options.policy,
                                     secret=secret)  # fmt: skip
                sandbox.put_archive(CHECKS_ROOT, root_owned_tar(tree, source.name))
        except FetchError as exc:
            why = options.redact(str(exc))
            options.log(f"check source {source.name}: could not fetch {source.url}: {why}")
            return f"the check source {source.name} ({source.url}) could not be fetched: {why}"
        options.log(f"check source {source.name} placed in {CHECKS_ROOT}/{source.name}")
    return None


SOURCE_TIMEOUT_SEC = 300


def run_one(sandbox: Sandbox, check: Check, options: CheckOptions) -> CheckResult:
    started = time.monotonic()
    env = dict(options.env)
    if isinstance(check, InvalidCheck):
        return _result(check, None, f"error: {check.problem}", started, options)
    if isinstance(check, CodeCheck):
        try:
            place_source(sandbox, check, options)
        except FetchError as exc:
            return _result(check, None, f"error: could not fetch the source: {exc}", started, options)
        command: str | list[str] = check.run
    elif isinstance(check, CommandCheck):
        command = ["bash", "-e", "-o", "pipefail", "-c", check.run]
        env = {**options.secrets, **COMMAND_ENV, **env}
    else:
        command = builtin_command(check)
    output = BoundedOutput()
    done = sandbox.exec(
        command,
        env=env,
        workdir="/app",
        timeout=check.timeout_sec,
        on_line=output.count,
        clean_env=True,
    )
    return _finished(check, done, output.text(done.output), started, options)


def builtin_command(check: Check) -> list[str]:
    # -I -S: no PYTHON* variables, no user or site packages: nothing the agent
    # planted (a sitecustomize, a .pth) runs before the program.
    return ["python3", "-I", "-S", PROGRAM_PATH, RESULTS_DIR, json.dumps(program_spec(check))]


def place_source(sandbox: Sandbox, check: CodeCheck, options: CheckOptions) -> None:
    """The check's source in /app/checks/<name>. Raises FetchError."""
    if clones_in_sandbox(check, options.network):
        env = {**GIT_CLEAN_ENV, **options.env}
        done = sandbox.exec(
            sandbox_clone_command(check), env=env, workdir="/", timeout=check.timeout_sec, clean_env=True
        )
        if not done.ok:
            why = "timed out" if done.timed_out else done.output.strip()[-2000:]
            raise FetchError(f"git clone in the sandbox failed: {why}")
        return
    with tempfile.TemporaryDirectory(prefix="pier-check-", dir=options.scratch) as tmp:
        tree = fetch_on_host(check, Path(tmp), timeout=check.timeout_sec, policy=options.policy)
        sandbox.put_archive(CHECKS_ROOT, root_owned_tar(tree, check.name))


def root_owned_tar(tree: Path, name: str) -> bytes:
    """tree as a tar whose top folder is `name`, owned by root in the sandbox (git
    refuses repositories owned by another user)."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(tree, arcname=name, filter=as_root)
    return buffer.getvalue()


class BoundedOutput:
    """Counts what a check printed (the exec keeps only its tail; very long lines
    come in pieces, so the count is close, not exact) and keeps the last
    OUTPUT_LIMIT bytes, saying how much came before."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.limit = limit
        self.total = 0

    def count(self, line: str) -> None:
        self.total += len(line.encode()) + 1

    def text(self, output: str) -> str:
        data = output.encode()
        if len(data) <= self.limit and self.total <= self.limit:
            return output
        kept = data[-self.limit :].decode(errors="ignore")
        total = max(self.total, len(data))
        return f"[output truncated: about {total} bytes in all; the last {self.limit} are kept]\n{kept}"


def _finished(
    check: Check, done: ExecResult, output: str, started: float, options: CheckOptions
) -> CheckResult:
    if done.timed_out:
        note = f"[stopped: the check ran past its time limit of {check.timeout_sec}s (timeout_sec)]"
        return _result(check, None, f"{output.rstrip()}\n{note}".lstrip(), started, options)
    return _result(check, done.exit_code, output, started, options)


def _result(
    check: Check, exit_code: int | None, output: str, started: float, options: CheckOptions
) -> CheckResult:
    clean = options.redact(output)
    return CheckResult(
        name=check.name,
        type=check.type,
        passed=exit_code == 0,
        exit_code=exit_code,
        output=clean,
        duration_s=round(time.monotonic() - started, 3),
        status=status_of(check, exit_code),
        runner="jetty",
        title=check.title,
        message=last_line(clean),
    )


def status_of(check: Check, exit_code: int | None) -> str:
    """pass on exit 0; error for a timeout, a broken check or source, a built-in that
    could not be evaluated (exit 2) or a command the shell cannot run; else fail."""
    if exit_code == 0:
        return "pass"
    if exit_code is None or (check.builtin and exit_code == 2):
        return "error"
    if isinstance(check, CommandCheck | CodeCheck) and exit_code in CANNOT_RUN:
        return "error"
    return "fail"


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= 300 else last[:299] + "…"


def summary_line(result: CheckResult) -> str:
    verdict = {"pass": "passed", "fail": "FAILED", "error": "ERROR", "skipped": "skipped"}[result.outcome]
    code = "" if result.exit_code in (0, None) else f", exit {result.exit_code}"
    last = next((line for line in reversed(result.output.strip().splitlines()) if line.strip()), "")
    detail = f": {last[:200]}" if last and result.failing else ""
    return f"check {result.name} {verdict} ({result.duration_s:.1f}s{code}){detail}"
