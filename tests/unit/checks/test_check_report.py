"""The eval summary from a runbook's own validation_report.json."""

import json
from pathlib import Path

import pytest

from pier.checks import ReportError, eval_summary

# The shape the corpus's runbooks write (e.g. Step 8 of a spreadsheet runbook).
CORPUS_STYLE = {
    "stages": [
        {"name": "setup", "passed": True, "message": "Inputs resolved, deps installed"},
        {"name": "plan", "passed": True, "message": "Built 4 placement plans"},
        {"name": "placement", "passed": False, "message": "Placed 3, skipped 0, failed 1"},
        {"name": "save", "passed": True, "message": "Workbook saved and reopened cleanly"},
    ],
    "results": {"placed": 3, "fail": 1},
    "overall_passed": False,
}


def write(folder: Path, report) -> Path:
    (folder / "validation_report.json").write_text(json.dumps(report))
    return folder


def test_summary_of_a_corpus_style_report(tmp_path):
    assert eval_summary(write(tmp_path, CORPUS_STYLE)) == {
        "overall_passed": False,
        "verdict": "FAIL",
        "checks": "3/4",
    }


def test_an_explicit_verdict_wins(tmp_path):
    report = {"stages": [{"name": "structure", "passed": True}], "results": {"verdict": "pass_with_warnings"}}
    assert eval_summary(write(tmp_path, {**report, "overall_passed": True})) == {
        "overall_passed": True,
        "verdict": "PASS_WITH_WARNINGS",
        "checks": "1/1",
    }


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ({"overall_passed": True}, {"overall_passed": True, "verdict": "PASS", "checks": "0/0"}),
        (
            {"stages": {"a": {"passed": True}, "b": True, "c": False}},
            {"overall_passed": None, "verdict": None, "checks": "2/3"},
        ),
        (
            {"stages": [{"name": "a", "status": "PASS"}, {"name": "b", "status": "fail"}, "odd"]},
            {"overall_passed": None, "verdict": None, "checks": "1/3"},
        ),
        ({"overall_passed": "yes"}, {"overall_passed": None, "verdict": None, "checks": "0/0"}),
    ],
)
def test_other_shapes_are_summarised_not_rejected(tmp_path, report, expected):
    assert eval_summary(write(tmp_path, report)) == expected


def test_no_report_is_no_eval(tmp_path):
    assert eval_summary(tmp_path) is None


@pytest.mark.parametrize(("content", "why"), [("{oops", "not valid JSON"), ("[1, 2]", "not a JSON object")])
def test_a_broken_report_says_why(tmp_path, content, why):
    (tmp_path / "validation_report.json").write_text(content)
    with pytest.raises(ReportError, match=why):
        eval_summary(tmp_path)
