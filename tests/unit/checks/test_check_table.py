"""What `pier run` prints about checks."""

from rich.console import Console

from pier.cli.checks import show_checks
from pier.record import CheckResult, Trajectory


def test_table_eval_and_the_tail_of_failures():
    record = Trajectory.new("r1", "c", "t")
    record.outputs.checks = [
        CheckResult(
            name="report",
            type="file_exists",
            passed=True,
            exit_code=0,
            output="passed: report.md exists (9 bytes)\n",
            duration_s=0.1,
        ),
        CheckResult(
            name="unit-tests",
            type="code",
            passed=False,
            exit_code=1,
            output="collected 3\nE assert 2 == 3\n1 failed\n",
            duration_s=2.5,
        ),
        CheckResult(
            name="slow",
            type="code",
            passed=False,
            exit_code=None,
            output="[stopped: time limit]",
            duration_s=3.0,
        ),
    ]
    record.outputs.eval = {"overall_passed": False, "verdict": "FAIL", "checks": "3/4"}
    console = Console(record=True, width=100)
    show_checks(record, console)
    text = console.export_text()
    assert "report" in text and "report.md exists (9 bytes)" in text and "passed: report.md" not in text
    assert "unit-tests" in text and "│ 1 " in text and "│ - " in text
    assert "unit-tests output (last lines; all in run.json):" in text and "E assert 2 == 3" in text
    assert "validation_report.json: verdict FAIL, stages 3/4 passed" in text


def test_nothing_printed_without_checks_or_report():
    console = Console(record=True)
    show_checks(Trajectory.new("r1", "c", "t"), console)
    assert console.export_text() == ""


def test_kind_runner_and_status_of_both_runners_and_the_merged_verdict():
    record = Trajectory.new("r1", "c", "t")
    record.outputs.checks = [
        CheckResult(name="outputs-exist", type="command", passed=True, exit_code=0, status="pass"),
        CheckResult(name="look", type="agent", passed=False, status="skipped", runner="agent"),
        CheckResult(name="said", type="agent", passed=False, status="fail", runner="agent", output="no"),
        CheckResult(name="broken", type="invalid", passed=False, status="error", output="error: no fence"),
    ]
    record.outputs.eval = {"version": 2, "verdict": "FAIL", "overall_passed": False, "checks": "1/4",
                           "failed": ["code_check:said", "code_check:broken"]}  # fmt: skip
    console = Console(record=True, width=120)
    show_checks(record, console)
    text = console.export_text()
    assert "kind" in text and "runner" in text and "status" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 5}
    assert "agent" in rows["look"] and "skipped" in rows["look"]
    assert (
        "command" in rows["outputs-exist"]
        and "jetty" in rows["outputs-exist"]
        and "pass" in rows["outputs-exist"]
    )
    assert "error" in rows["broken"]
    assert "look output" not in text and "broken output" in text and "said output" in text
    assert "validation_report.json (merged with pier's checks): verdict FAIL, entries 1/4 passed" in text
    assert "failed: code_check:said" in text
