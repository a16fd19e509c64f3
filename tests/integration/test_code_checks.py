"""The platform's checks on a real Docker engine, with the `script` agent:
runbooks shaped like the platform's create-runbook templates (programmatic and
rubric) with a `## Code Checks` section, `code_checks:` settings, strict
evaluation, secret exposure, and the evaluation report v2 pier merges."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import ssl
import subprocess
import textwrap
import threading
import uuid
from collections.abc import Iterator

import pytest
from tests.integration.test_checks import by_name, check_repo, events, git, sandboxes_of, start  # noqa: F401 (check_repo: a fixture)

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.settings import get_settings
from pier.storage import open_storage
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

FENCE = "```"


def check(ident: str, name: str, lang: str, body: str) -> str:
    return f"### {ident} — {name}\n\n{FENCE}{lang}\n{textwrap.dedent(body).strip()}\n{FENCE}\n"


def programmatic(front: dict, steps: str, checks: list[str], report: dict | None) -> str:
    """A runbook in the shape of the platform's programmatic template: frontmatter,
    steps with bash blocks, `## Code Checks`, a Checklist, and the report section
    (whose JSON example, and a bash block there, are not steps)."""
    front = {"version": "1.0.0", "evaluation": "programmatic", "agent": "script", "snapshot": "", **front}
    head = "\n".join(f"{key}: {json.dumps(value)}" for key, value in front.items())
    write = (
        f"cat > {{{{results_dir}}}}/validation_report.json <<'EOF'\n{json.dumps(report, indent=2)}\nEOF"
        if report is not None
        else "echo 'no report this time'"
    )
    return f"""---
{head}
---

# Test Task — Agent Runbook

## Objective

Write an answer and a summary, then the validation report.

---

## REQUIRED OUTPUT FILES (MANDATORY)

| File | Description |
|------|-------------|
| `{{{{results_dir}}}}/answer.json` | the answer |
| `{{{{results_dir}}}}/summary.md` | summary |
| `{{{{results_dir}}}}/validation_report.json` | Evaluation report v2 |

---

## Step 1: Environment Setup

{FENCE}bash
mkdir -p {{{{results_dir}}}}
{textwrap.dedent(steps).strip()}
{FENCE}

---

## Code Checks

One `### <id> — <name>` heading per check, followed by exactly one fenced block.

{chr(10).join(checks)}
---

## Checklist

- [ ] summary.md has the required sections

---

## Write Validation Report

Write `{{{{results_dir}}}}/validation_report.json` **last**.

{FENCE}json
{{"version": 2, "checks": []}}
{FENCE}

{FENCE}bash
echo "the report's own example: never a step" > {{{{results_dir}}}}/template-ran.txt
{FENCE}

## Step 7: Write it

{FENCE}bash
{write}
{FENCE}
"""


STEPS = """
cd {{results_dir}}
echo '{"answer": 42}' > answer.json
printf '# Summary\\n\\nSee [the answer](answer.json) and [details](details.md).\\n' > summary.md
printf 'no links here\\n' > details.md
printf '# Broken\\n\\n[gone](missing.md)\\n' > broken.md
"""

STEP_ENTRY = {"kind": "step", "id": "setup", "name": "Environment Setup", "status": "pass", "message": "ok"}
CHECKLIST_ENTRY = {
    "kind": "checklist",
    "id": "summary-md-has-the-required-sections",
    "name": "summary.md has the required sections",
    "status": "pass",
}

# Every fence kind and every built-in, passing and failing: (id, lang, body, expected status).
CHECKS = [
    (
        "outputs-exist",
        "bash",
        "test -s {{results_dir}}/answer.json && test -s {{results_dir}}/summary.md",
        "pass",
    ),
    (
        "dirs",
        "bash",
        'test "$RESULTS_DIR" = /app/results && test "$CHECKS_DIR" = {{checks_dir}} '
        '&& test "$ASSETS_DIR" = {{assets_dir}} && echo "dirs ok"',
        "pass",
    ),
    ("sh-fence", "sh", "grep -q 42 $RESULTS_DIR/answer.json", "pass"),
    ("no-lang", "", "test -f {{results_dir}}/details.md", "pass"),
    ("pipefail", "bash", "false | true\necho never", "fail"),
    ("fails", "bash", "echo 'expected 41'; exit 3", "fail"),
    ("cannot-run", "bash", "no-such-command-here", "error"),
    ("marker", "bash", "echo check-ran > {{results_dir}}/marker.txt", "pass"),
    ("exists", "yaml", "use: file_exists\npath: answer.json", "pass"),
    ("exists-not", "yaml", "use: file_exists\npath: nothing.json", "fail"),
    ("size", "yaml", "use: min_size\npath: answer.json\nmin_bytes: 5", "pass"),
    ("size-not", "yaml", "use: min_size\npath: answer.json\nmin_bytes: 5000", "fail"),
    ("json", "check", "use: json_valid\npath: answer.json", "pass"),
    ("json-not", "yaml", "use: json_valid\nglob: '*.md'", "fail"),
    ("present", "yaml", "use: regex_present\nglob: summary.md\npattern: '^# Summary'", "pass"),
    ("present-not", "yaml", "use: regex_present\npath: summary.md\npattern: FINAL", "fail"),
    ("absent", "yaml", "use: regex_absent\nglob: '*.md'\npattern: TODO", "pass"),
    ("absent-not", "yaml", "use: regex_absent\npath: summary.md\npattern: answer", "fail"),
    ("links", "yaml", "use: markdown_relative_links_resolve\npath: summary.md", "pass"),
    ("links-not", "yaml", "use: markdown_relative_links_resolve", "fail"),
    ("bad-use", "yaml", "use: no_such_builtin\npath: a", "error"),
    ("bad-spec", "yaml", "use: regex_present\npath: summary.md", "error"),
    ("agent-told", "agent", "Open the summary and confirm it reads well.", "pass"),
    ("agent-silent", "agent", "Confirm something only you can see.", "skipped"),
]


def platform_checks() -> list[str]:
    return [check(ident, f"the {ident} check", lang, body) for ident, lang, body, _ in CHECKS]


def report_of(record: Trajectory) -> dict:
    storage = open_storage(get_settings().storage_location)
    key = record.result_key("validation_report.json")
    with storage.open(key) as handle:
        return json.loads(handle.read())


def entries(report: dict, kind: str = "code_check") -> dict[str, dict]:
    return {e["id"]: e for e in report["checks"] if e["kind"] == kind}


def test_programmatic_template_every_fence_and_builtin_merged_into_one_report(base_image, docker_backend):
    agent_report = {
        "version": 2,
        "verdict": "pass",
        "overall_passed": True,
        "checks": [
            STEP_ENTRY,
            CHECKLIST_ENTRY,
            # pier runs `fails`: the agent's entry is replaced by pier's.
            {
                "kind": "code_check",
                "id": "fails",
                "name": "x",
                "status": "pass",
                "message": "agent says fine",
            },
            # no such check: dropped.
            {"kind": "code_check", "id": "made-up", "name": "y", "status": "fail"},
            {
                "kind": "code_check",
                "id": "agent-told",
                "name": "the agent-told check",
                "status": "pass",
                "message": "reads well",
            },
        ],
    }
    text = programmatic({}, STEPS, platform_checks(), agent_report)
    record = start(text, base_image)
    assert record.status == "completed", record.error
    # The script agent ran the steps, not the checks and not the report's template.
    lines = events(record.trajectory_id)
    assert not any("check-ran" in line for line in lines if "marker" not in line)
    files = {f.path for f in record.outputs.results_files}
    assert "marker.txt" not in files, "the script agent ran a ## Code Checks block as a step"
    assert "template-ran.txt" not in files, "the script agent ran the report template's block"
    results = by_name(record)
    for ident, lang, _body, expected in CHECKS:
        assert results[ident].outcome == expected, (ident, lang, results[ident].output)
        assert results[ident].runner == ("agent" if lang == "agent" else "jetty")
    assert "dirs ok" in results["dirs"].output
    assert "no-such-command-here" in results["cannot-run"].output and results["cannot-run"].exit_code == 127
    report = report_of(record)
    assert report["version"] == 2
    merged = entries(report)
    assert set(merged) == {c[0] for c in CHECKS}, "one entry per check, the made-up one dropped"
    assert merged["fails"]["status"] == "fail" and merged["fails"]["details"]["runner"] == "jetty"
    assert merged["fails"]["details"]["exit_code"] == 3
    assert "expected 41" in merged["fails"]["details"]["stdout_tail"]
    assert merged["fails"]["details"]["command"].startswith("echo 'expected 41'")
    assert merged["agent-told"]["status"] == "pass" and merged["agent-told"]["details"]["runner"] == "agent"
    assert merged["agent-silent"]["status"] == "skipped"
    assert entries(report, "step")["setup"]["status"] == "pass"
    assert entries(report, "checklist")
    assert report["verdict"] == "fail" and report["overall_passed"] is False
    assert report["agent_verdict"] == "pass", "the agent's verdict is kept as a hint"
    assert record.success is False
    assert record.outputs.eval["verdict"] == "FAIL" and record.outputs.eval["version"] == 2
    assert "code_check:fails" in record.outputs.eval["failed"]
    notes = " ".join(record.outputs.warnings)
    assert "fails was replaced" in notes and "made-up was dropped" in notes
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def passing(*extra: str) -> list[str]:
    return [
        check("outputs-exist", "outputs exist", "bash", "test -s {{results_dir}}/answer.json"),
        check("json", "answer is JSON", "yaml", "use: json_valid\npath: answer.json"),
        *extra,
    ]


@pytest.mark.parametrize("strict", [False, True])
def test_an_unreported_agent_check_is_skipped_or_with_strict_an_error(base_image, strict):
    report = {"version": 2, "checks": [STEP_ENTRY]}
    text = programmatic(
        {"strict_evaluation": strict}, STEPS, passing(check("look", "look", "agent", "Look at it.")), report
    )
    record = start(text, base_image)
    assert record.status == "completed", record.error
    look = by_name(record)["look"]
    assert look.outcome == ("error" if strict else "skipped")
    assert entries(report_of(record))["look"]["status"] == look.outcome
    assert record.success is (not strict)
    assert record.outputs.eval["passed"] is (not strict)


def test_no_report_at_all_pier_writes_its_own(base_image):
    record = start(programmatic({}, STEPS, passing(), None), base_image)
    assert record.status == "completed", record.error
    report = report_of(record)
    assert report["version"] == 2 and set(entries(report)) == {"outputs-exist", "json"}
    assert report["verdict"] == "pass" and record.success is True
    assert "validation_report.json" in {f.path for f in record.outputs.results_files}


def test_executor_agent_the_agents_entries_stand(base_image):
    """Under `code_checks.executor: agent` pier runs no command check: the agent's
    entry stands (even for a check that would fail if pier ran it); one it did
    not report is skipped; a fence's own executor=agent does the same."""
    report = {
        "version": 2,
        "checks": [
            {
                "kind": "code_check",
                "id": "would-fail",
                "name": "w",
                "status": "pass",
                "details": {"command": "false", "exit_code": 0, "stdout_tail": ""},
            },
        ],
    }
    checks = [
        check("would-fail", "fails if pier runs it", "bash", "false"),
        check("unreported", "not reported", "yaml", "use: file_exists\npath: answer.json"),
    ]
    record = start(programmatic({"code_checks": {"executor": "agent"}}, STEPS, checks, report), base_image)
    assert record.status == "completed", record.error
    results = by_name(record)
    assert results["would-fail"].outcome == "pass" and results["would-fail"].runner == "agent"
    assert results["unreported"].outcome == "skipped"
    assert record.success is True
    # The same runbook under the default executor: pier runs both, and `false` fails.
    record = start(programmatic({}, STEPS, checks, report), base_image)
    assert by_name(record)["would-fail"].outcome == "fail" and record.success is False
    # A fence marked executor=agent is the agent's under the default executor.
    marked = [check("would-fail", "x", "bash executor=agent", "false"), checks[1]]
    record = start(programmatic({}, STEPS, marked, report), base_image)
    assert by_name(record)["would-fail"].runner == "agent" and record.success is True


SECRET = "s3cr3t-value-7d1f0c"


def test_a_secret_withheld_from_the_agent_reaches_the_checks_and_is_scrubbed(base_image):
    steps = STEPS + (
        f"\n(env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n') | grep -c '{SECRET[:8]}' "
        "> {{results_dir}}/probe.txt || true"
    )
    front = {
        "secrets": {"CHECK_TOKEN": {"env": "CHECK_TOKEN", "expose_to_agent": False, "expose_to_checks": True}}
    }
    checks = passing(
        check(
            "token",
            "the token reaches the check",
            "bash",
            'test -n "$CHECK_TOKEN"\necho "token=$CHECK_TOKEN"',
        )
    )
    record = start(programmatic(front, steps, checks, None), base_image, env={"CHECK_TOKEN": SECRET})
    assert record.status == "completed", record.error
    storage = open_storage(get_settings().storage_location)
    with storage.open(record.result_key("probe.txt")) as handle:
        assert handle.read().strip() == b"0", "the agent's environment or /proc held the withheld secret"
    token = by_name(record)["token"]
    assert token.outcome == "pass", token.output
    assert "token=" in token.output and SECRET not in token.output
    assert SECRET not in json.dumps(report_of(record))
    assert SECRET not in json.dumps(record.model_dump(mode="json"))


def rubric(judges: list[dict], checks: list[str]) -> str:
    report = {
        "version": 2,
        "verdict": "pass",
        "checks": [STEP_ENTRY, *judges],
        "pass_threshold": 4.0,
    }
    text = programmatic({"evaluation": "rubric"}, STEPS, checks, report)
    return text.replace(
        "## Checklist", "## Step 4: Evaluate Against Rubric\n\n| # | Criterion |\n\n## Checklist"
    )


def test_rubric_template_judges_decide_with_the_checks(base_image):
    judges = [
        {
            "kind": "judge",
            "id": "clarity",
            "name": "Clarity",
            "status": "pass",
            "score": 4,
            "max_score": 5,
            "threshold": 3,
        },
        {
            "kind": "judge",
            "id": "depth",
            "name": "Depth",
            "status": "pass",
            "score": 2,
            "max_score": 5,
            "threshold": 3,
        },
    ]
    record = start(rubric(judges, passing()), base_image)
    assert record.status == "completed", record.error
    report = report_of(record)
    assert entries(report, "judge")["depth"]["status"] == "fail", "a score under its threshold fails"
    assert report["overall_score"] == 3.0 and report["pass_threshold"] == 4.0
    assert report["rubric_scores"]["clarity"]["score"] == 4
    assert report["verdict"] == "fail" and record.success is False
    judges[1]["score"] = 5
    record = start(rubric(judges, passing()), base_image)
    assert record.success is True and report_of(record)["overall_score"] == 4.5


def test_both_forms_in_one_run_one_report(base_image, tmp_path):
    (tmp_path / "scripts").mkdir()
    front = {
        "checks": [
            {"name": "own", "type": "regex", "path": "summary.md", "pattern": "Summary"},
            {
                "name": "placeholder",
                "type": "code",
                "source": "scripts",
                "run": "test {{checks_dir}}/scripts = /app/checks/scripts",
            },
        ]
    }
    record = start(programmatic(front, STEPS, passing(), None), base_image, source_dir=tmp_path)
    assert record.status == "completed", record.error
    results = by_name(record)
    assert results["own"].outcome == "pass" and results["outputs-exist"].outcome == "pass"
    assert results["placeholder"].outcome == "pass", results["placeholder"].output
    assert set(entries(report_of(record))) == {"own", "placeholder", "outputs-exist", "json"}
    assert record.success is True


# --- code_checks.sources with a secret, over https with a token


TOKEN = "ghp-test-token-5a9c2e71"


class _TokenGit(http.server.SimpleHTTPRequestHandler):
    """git's dumb HTTP, answering only requests that carry the token as basic auth."""

    seen: list[str]

    def do_GET(self) -> None:
        expected = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.seen.append("refused")
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="checks"')
            self.end_headers()
            return
        self.seen.append("served")
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https_git(check_repo, tmp_path, monkeypatch) -> Iterator[tuple[str, list[str]]]:  # noqa: F811 (a fixture)
    """The check repository over https on 127.0.0.1 (only pier, on the host, clones
    it), with a certificate git is told to trust, behind a token."""
    served = tmp_path / "served"
    served.mkdir()
    git("clone", "-q", "--bare", str(check_repo), str(served / "checks.git"), cwd=tmp_path)
    (served / "checks.git" / "run.sh").write_text("")
    git("update-server-info", cwd=served / "checks.git")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    seen: list[str] = []
    handler = functools.partial(type("H", (_TokenGit,), {"seen": seen}), directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", f"127.0.0.1:{port}")
    monkeypatch.setenv("GIT_SSL_CAINFO", str(cert))
    get_settings.cache_clear()
    try:
        yield f"https://127.0.0.1:{port}/checks.git", seen
    finally:
        server.shutdown()
        server.server_close()


def source_front(url: str, ref: str = "main", **flags: object) -> dict:
    return {
        "secrets": {"GITHUB_TOKEN": {"env": "GITHUB_TOKEN", **flags}},
        "code_checks": {"sources": [{"name": "checks", "type": "git", "url": url, "ref": ref,
                                     "secret": "GITHUB_TOKEN"}]},
    }  # fmt: skip


# The pattern goes in a file: on grep's command line it would find itself in /proc.
PROBE_AGENT = (
    f"\necho '{TOKEN[:12]}' > /tmp/pattern"
    "\n(env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; cat /proc/*/cmdline 2>/dev/null) "
    "| grep -c -f /tmp/pattern > {{results_dir}}/probe.txt || true"
    "\nls /app/checks > {{results_dir}}/checks-dir.txt 2>&1 || true"
)


def test_a_source_with_a_secret_is_cloned_after_the_agent_which_never_sees_the_token(base_image, https_git):
    url, seen = https_git
    checks = [
        check("from-source", "the source's script", "bash", "sh {{checks_dir}}/checks/check.sh"),
        check("leak", "prints what it was given", "bash", 'echo "token=$GITHUB_TOKEN"'),
    ]
    front = source_front(url, expose_to_checks=True)
    text = programmatic(front, STEPS + "\necho 42 > {{results_dir}}/answer.txt" + PROBE_AGENT, checks, None)
    record = start(text, base_image, env={"GITHUB_TOKEN": TOKEN})
    assert record.status == "completed", record.error
    storage = open_storage(get_settings().storage_location)
    with storage.open(record.result_key("probe.txt")) as handle:
        assert handle.read().strip() == b"0", (
            "the agent's environment, /proc or a command line held the token"
        )
    with storage.open(record.result_key("checks-dir.txt")) as handle:
        assert b"checks" not in handle.read(), "the check source was in the sandbox while the agent ran"
    results = by_name(record)
    assert results["from-source"].outcome == "pass", results["from-source"].output
    assert "answer is 42" in results["from-source"].output
    assert results["leak"].outcome == "pass" and "token=" in results["leak"].output
    assert TOKEN not in results["leak"].output and TOKEN not in json.dumps(report_of(record))
    assert TOKEN not in "\n".join(events(record.trajectory_id))
    assert "served" in seen


@pytest.mark.parametrize(
    ("token", "ref", "why"),
    [("wrong-token", "main", "ls-remote"), (TOKEN, "no-such-ref", "no branch or tag 'no-such-ref'")],
)
def test_a_dead_token_or_a_missing_ref_fails_before_any_sandbox(
    base_image, docker_backend, https_git, token, ref, why
):
    url, _seen = https_git
    checks = [check("from-source", "x", "bash", "sh {{checks_dir}}/checks/check.sh")]
    record = start(
        programmatic(source_front(url, ref), STEPS, checks, None), base_image, env={"GITHUB_TOKEN": token}
    )
    assert record.status == "failed" and record.failed_stage == "prepare", (record.status, record.error)
    assert why in record.error and "no sandbox was created" in record.error
    assert token not in record.error
    assert not sandboxes_of(docker_backend, record.trajectory_id)
    assert next(s for s in record.stages if s.name == "create").status == "skipped"


def test_under_executor_agent_the_source_is_there_before_the_agent(base_image, https_git):
    url, _seen = https_git
    front = {**source_front(url), "code_checks": {**source_front(url)["code_checks"], "executor": "agent"}}
    steps = (
        STEPS
        + "\necho 42 > {{results_dir}}/answer.txt\nsh /app/checks/checks/check.sh > {{results_dir}}/ran.txt"
        + PROBE_AGENT
    )
    report = {
        "version": 2,
        "checks": [{"kind": "code_check", "id": "from-source", "name": "x", "status": "pass"}],
    }
    checks = [check("from-source", "the source's script", "bash", "sh {{checks_dir}}/checks/check.sh")]
    record = start(programmatic(front, steps, checks, report), base_image, env={"GITHUB_TOKEN": TOKEN})
    assert record.status == "completed", record.error
    storage = open_storage(get_settings().storage_location)
    with storage.open(record.result_key("ran.txt")) as handle:
        assert b"answer is 42" in handle.read()
    with storage.open(record.result_key("probe.txt")) as handle:
        assert handle.read().strip() == b"0"
    assert by_name(record)["from-source"].runner == "agent" and record.success is True


# --- a real agent CLI against the scripted model, reporting an agent check


def test_a_real_cli_reports_its_agent_check_and_pier_runs_the_rest(agent_image, model_server, monkeypatch):
    """claude-code, driven by the scripted provider, writes the v2 report with its
    entry for the agent check (and one for a check pier runs, which pier replaces);
    the note appended to the runbook reached the model."""
    from tests.support import model_script

    agent_report = {
        "version": 2,
        "verdict": "pass",
        "checks": [
            {
                "kind": "code_check",
                "id": "renders",
                "name": "It renders",
                "status": "pass",
                "message": "looked",
            },
            {
                "kind": "code_check",
                "id": "report-exists",
                "name": "x",
                "status": "fail",
                "message": "agent's",
            },
        ],
    }
    monkeypatch.setattr(model_script, "ANSWER_PATH", "/app/results/validation_report.json")
    monkeypatch.setattr(model_script, "ANSWER_TEXT", json.dumps(agent_report))
    text = f"""---
agent: claude-code
model: claude-sonnet-4-5
snapshot: ""
evaluation: programmatic
strict_evaluation: true
---
# Report

Write the validation report to {{{{results_dir}}}}/validation_report.json.

## Code Checks

{check("report-exists", "The report exists", "bash", "test -s {{results_dir}}/validation_report.json")}
{check("renders", "It renders", "agent", "Look at the report and confirm it reads well.")}
"""
    key = f"sk-pier-test-{uuid.uuid4().hex}"
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": model_server.url}
    task = task_from_runbook(parse(text))
    request = RunRequest(collection="agents", task_name="checks", task=task,
                         run_params={"snapshot": "", "image": agent_image}, env=env)  # fmt: skip
    record = run(Services(get_settings()), request)
    assert record.status == "completed", record.error
    sent = json.dumps([r.body for r in model_server.model_calls()])
    assert "You run these checks" in sent and "renders" in sent, "the note never reached the model"
    results = by_name(record)
    assert results["renders"].runner == "agent" and results["renders"].outcome == "pass"
    assert results["report-exists"].runner == "jetty" and results["report-exists"].outcome == "pass"
    merged = entries(report_of(record))
    assert (
        merged["renders"]["message"] == "looked" and merged["report-exists"]["details"]["runner"] == "jetty"
    )
    assert record.success is True and record.outputs.eval["passed"] is True
