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
