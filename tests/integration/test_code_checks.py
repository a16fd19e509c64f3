"""The platform's checks on a real Docker engine, with the `script` agent:
runbooks shaped like the platform's create-runbook templates (programmatic and
rubric) with a `## Code Checks` section, `code_checks:` settings, strict
evaluation, secret exposure, and the evaluation report v2 pier merges."""

from __future__ import annotations

import json
import textwrap

import pytest
from tests.integration.test_checks import by_name, events, sandboxes_of, start

from pier.record import Trajectory
from pier.settings import get_settings
from pier.storage import open_storage

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
