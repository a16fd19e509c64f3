"""Checks on a real Docker engine: built-in and code checks, pre-flight, the clean
shell, nothing the agent left running, fresh isolation, and the eval summary."""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import CheckResult, Trajectory
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.fence import withdraw
from pier.settings import get_settings
from pier.tasks import step_override, task_from_runbook

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
OUTPUT_LIMIT = 64 * 1024


def runbook(script: str, checks: list[dict] | None = None, **front: object) -> str:
    front.setdefault("agent", "script")
    front.setdefault("snapshot", "")
    if checks is not None:
        front["checks"] = checks
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# test\n\n```bash\n{script}\n```\n"


def start(
    text: str,
    image: str,
    *,
    params: dict | None = None,
    env: dict | None = None,
    source_dir: Path = Path("/"),
    **step: object,
) -> Trajectory:
    task = task_from_runbook(parse(text))
    if step:
        task = task.model_copy(update={"step_configs": {"run": step_override(task.run_step(), **step)}})
    request = RunRequest(
        collection="checks-tests",
        task_name="t",
        task=task,
        run_params={"snapshot": "", "image": image, **(params or {})},
        env=env or {},
        source_dir=source_dir,
    )
    return run(Services(get_settings()), request)


def by_name(record: Trajectory) -> dict[str, CheckResult]:
    return {check.name: check for check in record.outputs.checks}


def sandboxes_of(backend, trajectory_id: str) -> list:
    return [s for s in backend.list_sandboxes() if s.labels.get(LABEL_RUN) == trajectory_id]


def events(trajectory_id: str) -> list[str]:
    return [e.line for e in Services(get_settings()).store.events(trajectory_id)]


def git(*args: str, cwd: Path) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


CHECK_42 = (
    'test "$(cat /app/results/answer.txt)" = 42 && echo "answer is 42" || { echo "expected 42"; exit 1; }\n'
)
CHECK_41 = (
    'test "$(cat /app/results/answer.txt)" = 41 && echo "answer is 41" || { echo "expected 41"; exit 1; }\n'
)


@pytest.fixture
def check_repo(tmp_path: Path) -> Path:
    """A git repository: main checks for 42; tag v1 checks for 41."""
    repo = tmp_path / "check-repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "check.sh").write_text(CHECK_41)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "v1", cwd=repo)
    git("tag", "v1", cwd=repo)
    (repo / "check.sh").write_text(CHECK_42)
    git("commit", "-qam", "main", cwd=repo)
    return repo


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    """A plain folder of check scripts, used as a code check source ("scripts")."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "still.sh").write_text(STILL)
    return tmp_path


def code(name: str, run: str, **extra: object) -> dict:
    return {"name": name, "type": "code", "source": "scripts", "run": run, **extra}


# --- derived images: the base without python3, without git (built once, reused)


def derived_image(backend, base: str, name: str, run_line: str) -> str:
    base_id = backend.api.inspect_image(base)["Id"].split(":")[-1][:12]
    tag = f"pier-test/{name}:{base_id}"
    if backend.image_exists(tag):
        return tag
    dockerfile = f"FROM {base}\n{run_line}\n"
    for item in backend.api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, decode=True):
        if "error" in item:
            raise RuntimeError(f"building {tag}: {item['error']}")
    return tag


@pytest.fixture(scope="session")
def no_python_image(docker_backend, base_image) -> str:
    return derived_image(
        docker_backend, base_image, "no-python", "RUN rm -f /usr/bin/python3 /usr/bin/python3.*"
    )


@pytest.fixture(scope="session")
def no_git_image(docker_backend, base_image) -> str:
    return derived_image(docker_backend, base_image, "no-git", "RUN rm -f /usr/bin/git")


# --- built-in checks


BUILTIN_SCRIPT = """cd {{results_dir}}
printf '# Report\\n\\nscore: 0.9\\n' > report.md
: > empty.txt
echo '{"overall_passed": true, "score": 0.9, "label": "gold", "stages": [{"passed": true}]}' > v.json
echo '{oops' > broken.json
ln -s /etc/hostname outside.txt"""

BUILTIN_CHECKS = [
    ({"type": "file_exists", "path": "report.md"}, True),
    ({"type": "file_exists", "path": "missing.md"}, False),
    ({"type": "nonempty", "path": "report.md"}, True),
    ({"type": "nonempty", "path": "empty.txt"}, False),
    ({"type": "json_valid", "path": "v.json"}, True),
    ({"type": "json_valid", "path": "broken.json"}, False),
    ({"type": "json_field", "path": "v.json", "field": "overall_passed", "equals": True}, True),
    ({"type": "json_field", "path": "v.json", "field": "stages.0.passed", "equals": False}, False),
    ({"type": "json_field", "path": "v.json", "field": "label", "in": ["gold", "silver"]}, True),
    ({"type": "json_field", "path": "v.json", "field": "score", "min": 0.95}, False),
    ({"type": "regex", "path": "report.md", "pattern": r"^score: 0\.\d+$"}, True),
    ({"type": "regex", "path": "report.md", "pattern": "^FINAL"}, False),
    ({"type": "regex", "path": "report.md", "pattern": "TODO", "must_match": False}, True),
    ({"type": "regex", "path": "report.md", "pattern": "^# Report", "must_match": False}, False),
]


def test_each_builtin_check_passes_and_fails(base_image, docker_backend):
    checks = [{"name": f"c{i}", **spec} for i, (spec, _) in enumerate(BUILTIN_CHECKS)]
    checks.append({"name": "escape", "type": "file_exists", "path": "outside.txt"})
    record = start(runbook(BUILTIN_SCRIPT, checks), base_image)
    assert record.status == "completed", record.error
    assert record.success is False, "a failing check makes the run unsuccessful"
    results = by_name(record)
    for i, (spec, expected) in enumerate(BUILTIN_CHECKS):
        result = results[f"c{i}"]
        assert result.passed is expected, (spec, result.output)
        assert result.exit_code == (0 if expected else 1), (spec, result.output)
        assert result.type == spec["type"] and result.duration_s > 0
    # A link out of the results folder is an error (exit 2), and is never read.
    assert results["escape"].exit_code == 2 and "leaves the results folder" in results["escape"].output
    assert next(s for s in record.stages if s.name == "check").detail == "7/15 checks passed"
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def test_passing_checks_make_a_successful_run(base_image, on_runtime):
    checks = [
        {"name": "report", "type": "file_exists", "path": "report.md"},
        {"name": "score", "type": "json_field", "path": "v.json", "field": "score", "max": 1},
    ]
    record = start(runbook(BUILTIN_SCRIPT, checks), base_image)
    assert record.status == "completed" and record.success is True, record.outputs.checks


# --- code checks


def test_code_checks_from_local_git_repos_pass_and_fail(base_image, check_repo, tmp_path):
    bare = tmp_path / "checks.git"
    git("clone", "-q", "--bare", str(check_repo), str(bare), cwd=tmp_path)
    plain = tmp_path / "plain-tests"
    plain.mkdir()
    (plain / "t.py").write_text(
        "import pathlib; assert pathlib.Path('/app/results/answer.txt').read_text() == '42\\n'\n"
    )
    checks = [
        {"name": "main", "type": "code", "source": str(check_repo), "run": "sh /app/checks/main/check.sh"},
        {
            "name": "old",
            "type": "code",
            "source": str(bare),
            "ref": "v1",
            "run": "sh /app/checks/old/check.sh",
        },
        {"name": "plain", "type": "code", "source": "plain-tests", "run": "python3 /app/checks/plain/t.py"},
        {"name": "no-ref", "type": "code", "source": str(check_repo), "ref": "v9", "run": "true"},
    ]
    record = start(runbook("echo 42 > {{results_dir}}/answer.txt", checks), base_image, source_dir=tmp_path)
    assert record.status == "completed", record.error
    results = by_name(record)
    assert results["main"].passed and results["main"].output == "answer is 42\n"
    assert not results["old"].passed and results["old"].exit_code == 1
    assert results["old"].output == "expected 41\n"
    assert results["plain"].passed, results["plain"].output
    assert not results["no-ref"].passed and results["no-ref"].exit_code is None
    assert "could not fetch the source" in results["no-ref"].output and "v9" in results["no-ref"].output
    assert record.success is False


TAMPER = """echo 41 > {{results_dir}}/answer.txt
printf 'echo "answer is 42"; exit 0\\n' > /tmp/fake.sh
mkdir -p /app/checks/unit && cp /tmp/fake.sh /app/checks/unit/check.sh
ln -s /app/checks/unit /app/checks/other
# and a daemon that keeps planting the fake, in case the source lands first
setsid env -i bash -c 'while :; do mkdir -p /app/checks/unit; cp /tmp/fake.sh /app/checks/unit/check.sh; sleep 0.02; done' \\
  >/dev/null 2>&1 </dev/null &
sleep 0.5"""


def test_the_agent_cannot_change_a_code_check_source(base_image, check_repo):
    checks = [
        {"name": "unit", "type": "code", "source": str(check_repo), "run": "sh /app/checks/unit/check.sh"}
    ]
    record = start(runbook(TAMPER, checks), base_image)
    assert record.status == "completed", record.error
    (result,) = record.outputs.checks
    assert not result.passed and result.exit_code == 1
    assert result.output == "expected 42\n", "the check ran the original source, not the agent's"


PLANTER = """echo 42 > {{results_dir}}/answer.txt
mkdir -p /app/checks/unit /app/checks/stray
printf 'echo planted\\n' > /app/checks/unit/planted.sh
printf 'echo planted\\n' > /app/checks/stray/run.sh"""

SEES_ONLY_ITS_SOURCE = (
    "for f in /app/checks/unit/planted.sh /app/checks/stray; do "
    'if [ -e "$f" ]; then echo "the check sees $f"; exit 3; fi; done; sh /app/checks/unit/check.sh'
)


def test_files_the_agent_plants_in_a_check_folder_are_gone_before_the_check(base_image, check_repo):
    """A file the source does not have (not one the source overwrites) and a
    folder of no check: /app/checks is emptied, not merged into."""
    checks = [{"name": "unit", "type": "code", "source": str(check_repo), "run": SEES_ONLY_ITS_SOURCE}]
    record = start(runbook(PLANTER, checks), base_image)
    assert record.status == "completed", record.error
    (result,) = record.outputs.checks
    assert result.output == "answer is 42\n" and result.passed, result.output


# --- pre-flight


def test_preflight_fails_on_an_image_without_python3(no_python_image, docker_backend):
    checks = [{"name": "report", "type": "file_exists", "path": "a.md"}]
    record = start(runbook("echo ran > {{results_dir}}/a.md", checks), no_python_image)
    assert record.status == "failed" and record.success is False
    assert record.failed_stage == "setup"
    assert "python3" in record.error and no_python_image in record.error
    assert "report" in record.error, "the message says which checks need it"
    steps = {s.name: s.status for s in record.stages}
    assert steps["run_agent"] == "skipped", "the agent never runs"
    assert not record.outputs.results_files
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def test_preflight_fails_on_an_image_without_git_for_a_clone_in_the_sandbox(no_git_image, check_repo):
    remote = [{"name": "unit", "type": "code", "source": "https://example.invalid/checks.git", "run": "true"}]
    record = start(runbook("echo 42 > {{results_dir}}/answer.txt", remote), no_git_image)
    assert record.status == "failed" and record.failed_stage == "setup"
    assert "git" in record.error and no_git_image in record.error
    assert {s.name: s.status for s in record.stages}["run_agent"] == "skipped"
    # A local source is fetched on the host: the image needs no git for it.
    local = [
        {"name": "unit", "type": "code", "source": str(check_repo), "run": "sh /app/checks/unit/check.sh"}
    ]
    record = start(runbook("echo 42 > {{results_dir}}/answer.txt", local), no_git_image)
    assert record.success is True, (record.error, record.outputs.checks)


# --- nothing left behind, limits, the clean shell


# Each count replaces the file by a rename: a writer killed mid-write never leaves
# it empty, so the check compares two counts, not a race with the truncation.
BACKGROUND_WRITER = """setsid env -i bash -c 'i=0; while :; do i=$((i+1)); echo $i > /app/results/.c; mv /app/results/.c /app/results/counter.txt; sleep 0.01; done' \\
  >/dev/null 2>&1 </dev/null &
(nohup sleep 1000 >/dev/null 2>&1 &)
sleep 1"""

# Run from a file, so that its own command line does not match what it looks for.
STILL = """a=$(cat /app/results/counter.txt); sleep 2; b=$(cat /app/results/counter.txt)
echo "$a $b"
if ps -eo args | grep -q -e '[c]ounter.txt' -e '^sleep 100[0]'; then echo "still running"; exit 1; fi
test "$a" = "$b"
"""


def test_an_agent_background_writer_is_stopped_before_checks(base_image, scripts):
    checks = [code("still", "sh /app/checks/still/still.sh")]
    record = start(runbook(BACKGROUND_WRITER, checks), base_image, source_dir=scripts)
    assert record.status == "completed", record.error
    (result,) = record.outputs.checks
    assert result.passed, result.output
    first, second = result.output.split()
    collected = (run_folder(record) / "results" / "counter.txt").read_text().strip()
    assert first == second == collected, "the check sees the file as it was when the agent ended"
    assert any("stopped what the agent left running" in line for line in events(record.trajectory_id))


def test_a_check_past_its_time_limit_is_stopped_and_fails(base_image, scripts):
    checks = [
        code("slow", "echo begun; sleep 120", timeout_sec=3),
        {"name": "after", "type": "nonempty", "path": "a.txt"},
    ]
    record = start(runbook("echo a > {{results_dir}}/a.txt", checks), base_image, source_dir=scripts)
    results = by_name(record)
    slow = results["slow"]
    assert not slow.passed and slow.exit_code is None
    assert slow.output.startswith("begun\n") and "time limit of 3s" in slow.output
    assert slow.duration_s < 120, "stopped at its limit, not when the sleep ended"
    assert results["after"].passed, "the checks after it still run"
    assert record.status == "completed" and record.success is False


def test_a_check_printing_megabytes_is_bounded(base_image, scripts):
    run_line = "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo END-OF-OUTPUT"
    checks = [code("loud", run_line)]
    record = start(runbook("echo a > {{results_dir}}/a.txt", checks), base_image, source_dir=scripts)
    (loud,) = record.outputs.checks
    assert loud.passed
    header, kept = loud.output.split("\n", 1)
    assert header.startswith("[output truncated: about 50") and "the last 65536 are kept" in header
    assert len(kept.encode()) <= OUTPUT_LIMIT and kept.endswith("END-OF-OUTPUT\n")
    assert len(record.model_dump_json()) < 4 * OUTPUT_LIMIT


ALLOWED_ENV = {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_"} | {
    "SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
}  # fmt: skip


def test_checks_see_none_of_the_agent_environment_or_credentials(base_image, scripts):
    token = "tok-3f9a1c77e2b4"
    agent = (
        'printf %s "$PIER_TEST_TOKEN" | wc -c > {{results_dir}}/token-length.txt\n'
        "echo 'export LEAKED=1' >> /root/.bashrc; echo 'LEAKED=1' >> /etc/environment"
    )
    checks = [
        code("env", "env"),
        code("no-credentials", "test ! -e /run/pier && echo gone"),
        code("cwd", "pwd; id -un"),
    ]
    record = start(runbook(agent, checks), base_image, env={"PIER_TEST_TOKEN": token}, source_dir=scripts)
    assert record.success is True, record.outputs.checks
    results = run_folder(record) / "results"
    assert (results / "token-length.txt").read_text().strip() == str(len(token)), "the agent had the secret"
    env_output = by_name(record)["env"].output
    names = {line.split("=", 1)[0] for line in env_output.splitlines() if "=" in line}
    assert names <= ALLOWED_ENV, names - ALLOWED_ENV
    assert "PIER_TEST_TOKEN" not in env_output and token not in env_output and "***" not in env_output
    assert "LEAKED" not in env_output
    assert by_name(record)["cwd"].output == "/app\nroot\n"


# --- fresh isolation


FRESH_AGENT = """echo 42 > {{results_dir}}/answer.txt
touch /tmp/agent-was-here
printf '#!/bin/sh\\necho "passed: fake"\\nexit 0\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3"""


def test_checks_isolation_fresh_runs_checks_in_a_clean_second_sandbox(base_image, scripts, docker_backend):
    note = scripts / "note.txt"
    note.write_text("attached\n")
    checks = [
        {"name": "answer", "type": "file_exists", "path": "answer.txt"},
        {"name": "missing", "type": "file_exists", "path": "missing.md"},
        code("machine", "test ! -e /tmp/agent-was-here && cat /app/assets/note.txt && ls /app"),
    ]
    params = {"file_paths": [str(note)]}
    fresh = start(
        runbook(FRESH_AGENT, checks, checks_isolation="fresh"), base_image, params=params, source_dir=scripts
    )
    assert fresh.status == "completed", fresh.error
    results = by_name(fresh)
    assert results["answer"].passed, results["answer"].output
    assert not results["missing"].passed, "the agent's fake python3 is not in the fresh sandbox"
    assert results["missing"].output == "failed: missing.md does not exist\n"
    assert results["machine"].passed, results["machine"].output
    assert results["machine"].output.split() == ["attached", "assets", "checks", "results"]
    lines = events(fresh.trajectory_id)
    assert any("checks run in a second sandbox" in line for line in lines)
    assert any(line.startswith("check sandbox") and line.endswith("deleted") for line in lines)
    assert not sandboxes_of(docker_backend, fresh.trajectory_id)
    # The same checks in the run's own sandbox see what the agent did to it.
    same = start(runbook(FRESH_AGENT, checks), base_image, params=params, source_dir=scripts)
    assert not by_name(same)["machine"].passed


# --- the runbook's own self-check


CORPUS_REPORT = {
    "stages": [
        {"name": "setup", "passed": True, "message": "Inputs resolved, deps installed"},
        {"name": "plan", "passed": True, "message": "Built 4 placement plans"},
        {"name": "placement", "passed": False, "message": "Placed 3, skipped 0, failed 1"},
        {"name": "save", "passed": True, "message": "Workbook saved and reopened cleanly"},
    ],
    "results": {"placed": 3, "skipped": 0, "fail": 1},
    "overall_passed": False,
}


def test_eval_summary_from_a_validation_report(base_image):
    script = f"cat > {{{{results_dir}}}}/validation_report.json <<'EOF'\n{json.dumps(CORPUS_REPORT, indent=2)}\nEOF"
    record = start(runbook(script), base_image)
    assert record.status == "completed", record.error
    assert record.outputs.eval == {"overall_passed": False, "verdict": "FAIL", "checks": "3/4"}
    assert record.success is True, "the report alone never changes success"
    checked = start(
        runbook(script, [{"name": "r", "type": "json_valid", "path": "validation_report.json"}]), base_image
    )
    assert checked.outputs.eval == record.outputs.eval and checked.success is True
    saved = json.loads((run_folder(record) / "run.json").read_text())
    assert saved["steps"]["run"]["outputs"]["eval"]["checks"] == "3/4"


# --- a git URL: cloned in the sandbox with network, on the host without


class _Recorder(http.server.SimpleHTTPRequestHandler):
    clients: list[str]

    def log_message(self, format: str, *args: object) -> None:
        self.clients.append(self.client_address[0])


@pytest.fixture
def git_http(
    check_repo, tmp_path, docker_backend, base_image, monkeypatch
) -> Iterator[tuple[str, list[str]]]:
    """The check repository over git's dumb HTTP, at an address sandboxes reach
    once the operator names it (PIER_SANDBOX_HOST_ALLOW)."""
    served = tmp_path / "served"
    served.mkdir()
    git("clone", "-q", "--bare", str(check_repo), str(served / "checks.git"), cwd=tmp_path)
    git("update-server-info", cwd=served / "checks.git")
    clients: list[str] = []
    handler = functools.partial(type("H", (_Recorder,), {"clients": clients}), directory=str(served))
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    address = f"{sandbox_gateway(docker_backend, base_image)}:{server.server_address[1]}"
    monkeypatch.setenv("PIER_SANDBOX_HOST_ALLOW", address)  # the sandbox may reach it
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", address)  # and so may pier, cloning on the host
    get_settings.cache_clear()
    try:
        yield f"http://{address}/checks.git", clients
    finally:
        withdraw(address.split(":")[0], server.server_address[1])  # named for this test only
        server.shutdown()
        server.server_close()


def sandbox_gateway(backend, image: str) -> str:
    """The host as a sandbox sees it: the default route's gateway."""
    sandbox = backend.create(
        SandboxSpec(image=image, limits=Limits(cpus=1, memory="256M"), labels={LABEL_RUN: "gw-probe"})
    )
    try:
        table = sandbox.exec("cat /proc/net/route", workdir="/").output.splitlines()
    finally:
        sandbox.delete()
    hex_ip = next(line.split()[2] for line in table[1:] if line.split()[1] == "00000000")
    return ".".join(str(int(hex_ip[i : i + 2], 16)) for i in (6, 4, 2, 0))


def test_a_git_url_is_cloned_in_the_sandbox_or_on_the_host(base_image, git_http):
    url, clients = git_http
    checks = [
        {"name": "unit", "type": "code", "source": url, "ref": "v1", "run": "sh /app/checks/unit/check.sh"}
    ]
    script = "echo 41 > {{results_dir}}/answer.txt"
    online = start(runbook(script, checks), base_image)
    assert online.success is True, online.outputs.checks
    gateway = url.split("//")[1].split(":")[0]
    subnet = gateway.rsplit(".", 2)[0] + "."
    assert clients and all(c.startswith(subnet) and c != gateway for c in clients), (
        "cloned inside the sandbox"
    )
    clients.clear()
    # Without network the sandbox cannot reach the server: the host fetched it.
    offline = start(runbook(script, checks), base_image, network_enabled=False)
    assert offline.success is True, (offline.error, offline.outputs.checks)
    assert clients and not any(c.startswith(subnet) and c != gateway for c in clients)


# --- the example, through the CLI


def test_the_checks_example_through_the_cli(base_image):
    env = {**os.environ, "PIER_BASE_IMAGE": base_image, "COLUMNS": "160"}
    proc = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(REPO / "examples" / "checks")],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    table = proc.stdout
    for name in (
        "report-written",
        "report-has-rows",
        "no-placeholders",
        "stats-valid",
        "enough-words",
        "stats",
    ):
        assert name in table
    assert table.count("passed") >= 7 and "failed" not in table
    assert "validation_report.json: verdict PASS, stages 2/2 passed" in table
