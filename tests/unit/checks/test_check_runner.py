"""The check runner against a stand-in sandbox that records what it is asked to
do and answers with scripted results: the order of things, what each check
runs and where, how an exit, a time-out or a failed fetch becomes a result."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pier.checks.model import parse_checks
from pier.checks.runner import (
    OUTPUT_LIMIT,
    BoundedOutput,
    CheckOptions,
    program_source,
    run_checks,
    summary_line,
)
from pier.errors import StageError
from pier.record import CheckResult
from pier.sandbox.base import ExecResult

Reply = Callable[[object], ExecResult]


def ok(output: str = "") -> ExecResult:
    return ExecResult(exit_code=0, output=output, duration_s=0.1)


class ScriptedSandbox:
    """Records exec/put calls; exec answers with reply(command)."""

    def __init__(self, reply: Reply = lambda _command: ok()):
        self.reply = reply
        self.calls: list[tuple[str, object, dict]] = []

    def exec(self, command, **kwargs) -> ExecResult:
        self.calls.append(("exec", command, kwargs))
        return self.reply(command)

    def put_files(self, dest_dir: str, files: dict, mode: int = 0o644) -> None:
        self.calls.append(("put_files", dest_dir, {"files": files, "mode": mode}))

    def put_archive(self, dest_dir: str, tar_bytes: bytes) -> None:
        self.calls.append(("put_archive", dest_dir, {"tar": tar_bytes}))

    def execs(self) -> list[tuple[object, dict]]:
        return [(command, kwargs) for kind, command, kwargs in self.calls if kind == "exec"]


def checks(*items: dict):
    return parse_checks(list(items))


def test_checks_start_from_an_empty_checks_folder_and_the_program_in_place():
    sandbox = ScriptedSandbox()
    run_checks(
        sandbox, checks({"name": "a", "type": "file_exists", "path": "x"}), CheckOptions(network=False)
    )
    (kind, setup, kwargs), (put, folder, files) = sandbox.calls[:2]
    assert kind == "exec" and kwargs["workdir"] == "/" and kwargs["timeout"] == 60
    assert setup.startswith(
        "rm -rf -- /app/checks /run/pier-checks && mkdir -p -- /app/checks /run/pier-checks"
    )
    assert (put, folder) == ("put_files", "/run/pier-checks")
    assert files == {"files": {"program.py": program_source()}, "mode": 0o644}


def test_without_built_in_checks_the_program_is_not_copied(tmp_path: Path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "t.sh").write_text("exit 0\n")
    sandbox = ScriptedSandbox()
    code = checks({"name": "c", "type": "code", "source": str(source), "run": "sh /app/checks/c/t.sh"})
    run_checks(sandbox, code, CheckOptions(network=False))
    assert [kind for kind, _, _ in sandbox.calls] == ["exec", "put_archive", "exec"]


def test_a_long_failure_to_prepare_is_quoted_by_its_end():
    said = "x" * 600 + "THE END"
    sandbox = ScriptedSandbox(lambda _c: ExecResult(exit_code=1, output=said, duration_s=0))
    with pytest.raises(StageError) as err:
        run_checks(
            sandbox, checks({"name": "a", "type": "nonempty", "path": "x"}), CheckOptions(network=False)
        )
    assert err.value.message == f"could not prepare /app/checks in the sandbox: {said[-500:]}"


def test_what_a_check_streamed_counts_toward_its_output_limit():
    """The exec keeps only the tail of a long output; the lines it streamed on
    the way are what tell the runner how much there was."""

    class Streaming(ScriptedSandbox):
        def exec(self, command, **kwargs):
            if kwargs.get("on_line") is None:
                return super().exec(command, **kwargs)
            for _ in range(100):
                kwargs["on_line"]("y" * 999)
            return ok("y" * 999 + "\n")

    (result,) = run_checks(
        Streaming(), checks({"name": "a", "type": "nonempty", "path": "x"}), CheckOptions(network=False)
    )
    assert result.output.startswith(
        "[output truncated: about 100000 bytes in all; the last 65536 are kept]\n"
    )


def test_a_silent_check_past_its_limit_says_only_that():
    reply = ExecResult(exit_code=137, output="", duration_s=3, timed_out=True)
    sandbox = ScriptedSandbox(lambda c: reply if isinstance(c, list) else ok())
    spec = {"name": "a", "type": "nonempty", "path": "x", "timeout_sec": 3}
    (result,) = run_checks(sandbox, checks(spec), CheckOptions(network=False))
    assert result.output == "[stopped: the check ran past its time limit of 3s (timeout_sec)]"


def test_a_sandbox_that_cannot_prepare_fails_the_check_stage():
    sandbox = ScriptedSandbox(
        lambda _c: ExecResult(exit_code=1, output="rm: read-only file system\n", duration_s=0)
    )
    with pytest.raises(StageError) as err:
        run_checks(
            sandbox, checks({"name": "a", "type": "nonempty", "path": "x"}), CheckOptions(network=False)
        )
    assert err.value.stage == "check"
    assert err.value.message == "could not prepare /app/checks in the sandbox: rm: read-only file system"


def test_a_built_in_check_runs_the_program_isolated_in_a_clean_shell():
    sandbox = ScriptedSandbox()
    spec = {
        "name": "score",
        "type": "json_field",
        "path": "v.json",
        "field": "score",
        "min": 0.5,
        "timeout_sec": 7,
    }
    options = CheckOptions(network=False, env={"SSL_CERT_FILE": "/ca.pem"})
    run_checks(sandbox, checks(spec), options)
    command, kwargs = sandbox.execs()[1]
    assert command[:5] == ["python3", "-I", "-S", "/run/pier-checks/program.py", "/app/results"]
    assert json.loads(command[5]) == {"type": "json_field", "path": "v.json", "field": "score", "min": 0.5}
    assert kwargs["clean_env"] is True and kwargs["env"] == {"SSL_CERT_FILE": "/ca.pem"}
    assert kwargs["workdir"] == "/app" and kwargs["timeout"] == 7


def test_exit_codes_time_outs_and_redaction_become_results():
    replies = {
        "echo pass": ok("fine\n"),
        "echo fail": ExecResult(exit_code=3, output="nope sk-1234567\n", duration_s=0.2),
        "echo slow": ExecResult(exit_code=137, output="begun\n", duration_s=5, timed_out=True),
    }
    sandbox = ScriptedSandbox(lambda c: replies.get(c, ok()))
    lines: list[str] = []
    seen: list[CheckResult] = []
    options = CheckOptions(
        network=True,  # the sources are cloned in the (scripted) sandbox
        redact=lambda text: text.replace("sk-1234567", "***"),
        log=lines.append,
        on_result=seen.append,
    )
    with_scripts = checks(
        *({"name": n, "type": "code", "source": "https://git.example/x.git", "run": f"echo {n}", "timeout_sec": 4}
          for n in ("pass", "fail", "slow"))
    )  # fmt: skip
    sandbox.reply = lambda c: (
        replies.get(c, ok()) if not str(c).startswith("rm -rf -- /app/checks/") else ok()
    )
    results = run_checks(sandbox, with_scripts, options)
    assert seen == results
    passed, failed, slow = results
    assert (passed.passed, passed.exit_code, passed.output) == (True, 0, "fine\n")
    assert (failed.passed, failed.exit_code, failed.output) == (False, 3, "nope ***\n")
    assert (slow.passed, slow.exit_code) == (False, None)
    assert slow.output == "begun\n[stopped: the check ran past its time limit of 4s (timeout_sec)]"
    assert [r.type for r in results] == ["code"] * 3 and all(r.duration_s >= 0 for r in results)
    assert lines[1].startswith("check fail FAILED (") and lines[1].endswith(", exit 3): nope ***")
    assert lines[2].endswith("): [stopped: the check ran past its time limit of 4s (timeout_sec)]")


def test_a_remote_source_is_cloned_in_the_sandbox_with_a_clean_git():
    sandbox = ScriptedSandbox()
    remote = {
        "name": "unit",
        "type": "code",
        "source": "https://git.example/c.git",
        "run": "make",
        "timeout_sec": 9,
    }
    run_checks(sandbox, checks(remote), CheckOptions(network=True, env={"SSL_CERT_FILE": "/ca.pem"}))
    (clone, kwargs), (run, run_kwargs) = sandbox.execs()[1:]
    assert "git clone --quiet -- https://git.example/c.git /app/checks/unit" in clone
    assert kwargs["env"] == {
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "SSL_CERT_FILE": "/ca.pem",
    }  # fmt: skip
    assert kwargs["clean_env"] is True and kwargs["workdir"] == "/" and kwargs["timeout"] == 9
    assert run == "make" and run_kwargs["workdir"] == "/app"


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (
            ExecResult(exit_code=128, output="fatal: repository not found\n", duration_s=1),
            "fatal: repository not found",
        ),
        (ExecResult(exit_code=137, output="", duration_s=9, timed_out=True), "timed out"),
    ],
)
def test_a_failed_clone_is_a_broken_check_not_a_crash(reply, says):
    sandbox = ScriptedSandbox(lambda c: reply if "git clone" in str(c) else ok())
    remote = {"name": "unit", "type": "code", "source": "https://git.example/c.git", "run": "make"}
    after = {"name": "after", "type": "file_exists", "path": "x"}
    first, second = run_checks(sandbox, checks(remote, after), CheckOptions(network=True))
    assert (first.passed, first.exit_code) == (False, None)
    assert first.output == f"error: could not fetch the source: git clone in the sandbox failed: {says}"
    assert second.name == "after", "the checks after it still run"
    assert "make" not in [command for command, _ in sandbox.execs()]


def test_a_local_source_arrives_as_a_root_owned_folder_named_after_the_check(tmp_path: Path):
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "check.sh").write_text("exit 0\n")
    (source / "sub" / "lib.sh").write_text(":\n")
    if os.geteuid() == 0:  # as root, files are root's already: make them someone else's
        for path in (source, source / "check.sh", source / "sub", source / "sub" / "lib.sh"):
            os.chown(path, 1000, 1000)
    sandbox = ScriptedSandbox()
    local = {"name": "unit", "type": "code", "source": str(source), "run": "sh /app/checks/unit/check.sh"}
    run_checks(sandbox, checks(local), CheckOptions(network=True))
    ((folder, payload),) = [(d, k) for kind, d, k in sandbox.calls if kind == "put_archive"]
    assert folder == "/app/checks"
    with tarfile.open(fileobj=io.BytesIO(payload["tar"])) as tar:
        members = tar.getmembers()
        assert sorted(m.name for m in members) == ["unit", "unit/check.sh", "unit/sub", "unit/sub/lib.sh"]
        assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "root", "root")}


def test_a_local_source_gone_since_prepare_is_a_broken_check_not_a_crash(tmp_path: Path):
    source = tmp_path / "src"
    source.mkdir()
    local = {"name": "unit", "type": "code", "source": str(source), "run": "true"}
    parsed = checks(local)
    source.rmdir()
    (result,) = run_checks(ScriptedSandbox(), parsed, CheckOptions(network=False))
    assert result.exit_code is None and not result.passed
    assert result.output.startswith(f"error: could not fetch the source: copying {source} failed: ")


def test_a_cancel_between_checks_stops_the_rest():
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1

    two = checks(
        {"name": "a", "type": "file_exists", "path": "x"}, {"name": "b", "type": "file_exists", "path": "y"}
    )
    results = run_checks(ScriptedSandbox(), two, CheckOptions(network=False, stop=stop))
    assert [r.name for r in results] == ["a"]


def test_bounded_output_keeps_output_up_to_the_limit_whole():
    exact = "x" * 9 + "\n"
    bounded = BoundedOutput(limit=10)
    bounded.count(exact[:-1])
    assert bounded.text(exact) == exact


def test_bounded_output_says_how_much_it_dropped():
    bounded = BoundedOutput(limit=10)
    for _ in range(5):
        bounded.count("abcdefghij")  # 55 bytes printed in all
    assert bounded.text("ghij\n") == (
        "[output truncated: about 55 bytes in all; the last 10 are kept]\nghij\n"
    )
    long = BoundedOutput(limit=10)
    assert (
        long.text("é" * 10) == "[output truncated: about 20 bytes in all; the last 10 are kept]\n" + "é" * 5
    )
    cut = BoundedOutput(limit=9)
    assert cut.text("é" * 10).endswith("\n" + "é" * 4), "a character cut in half is dropped"
    assert OUTPUT_LIMIT == 64 * 1024


def test_summary_lines():
    def result(passed: bool, code: int | None, output: str) -> CheckResult:
        return CheckResult(
            name="n", type="code", passed=passed, exit_code=code, output=output, duration_s=1.25
        )

    assert summary_line(result(True, 0, "all good\n")) == "check n passed (1.2s)"
    assert summary_line(result(False, 2, "a\nlast words\n\n")) == "check n FAILED (1.2s, exit 2): last words"
    assert summary_line(result(False, 1, "")) == "check n FAILED (1.2s, exit 1)"
    assert summary_line(result(False, None, "  \n")) == "check n FAILED (1.2s)"
    assert summary_line(result(False, 1, "y" * 300)) == f"check n FAILED (1.2s, exit 1): {'y' * 200}"


def test_a_code_checks_command_past_its_timeout_is_error_not_fail():
    """The platform's rule: a `## Code Checks` command that times out is `error`
    (its exit 1 would be `fail`), and its time limit is code_checks.timeout_sec."""
    from pier.checks.platform import CodeChecksConfig, compile_code_checks
    from pier.runbook.sections import code_checks

    body = (
        "# t\n\n## Code Checks\n\n### slow — waits\n\n```bash\nsleep 600\n```\n\n"
        "### wrong — fails\n\n```bash\nexit 1\n```\n"
    )
    compiled = compile_code_checks(code_checks(body), CodeChecksConfig(timeout_sec=5))
    sandbox = ScriptedSandbox(
        lambda c: (
            ExecResult(137, "", 5, timed_out=True)
            if "sleep 600" in str(c)
            else ExecResult(1, "", 0.1)
            if "exit 1" in str(c)
            else ok()
        )
    )
    slow, wrong = run_checks(sandbox, list(compiled.checks), CheckOptions(network=False))
    assert (slow.outcome, wrong.outcome) == ("error", "fail")
    assert [kwargs["timeout"] for c, kwargs in sandbox.execs() if "sleep 600" in str(c)] == [5]
