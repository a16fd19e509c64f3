"""The summary `pier run` prints: a run with 2,000 result files is summarised."""

from __future__ import annotations

import io

from rich.console import Console

from pier.cli import summary as cli_summary
from pier.record import ResultFile, RunStatus, Trajectory


def summary(monkeypatch, tmp_path, files: int) -> str:
    record = Trajectory.new("b" * 32, "local", "many", status=RunStatus.completed, success=True)
    record.outputs.results_files = [
        ResultFile(path=f"part-{n:04}.txt", content_type="text/plain", extension=".txt", size=1000)
        for n in range(files)
    ]
    record.outputs.primary_files = ["part-0000.txt"]
    screen = io.StringIO()
    monkeypatch.setattr(cli_summary, "out", Console(file=screen, width=200, color_system=None))
    cli_summary.show_summary(record, tmp_path)
    return screen.getvalue()


def test_thousands_of_result_files_are_summarised(monkeypatch, tmp_path):
    text = summary(monkeypatch, tmp_path, 2000)
    listed = [line for line in text.splitlines() if "part-" in line]
    assert len(listed) == cli_summary.SUMMARY_FILES
    assert "★ part-0000.txt" in listed[0]
    assert "... and 1990 more (2.0 MB; 2000 files, 2.0 MB in all)" in text
    assert len(text.splitlines()) < 20


def test_a_few_result_files_are_all_listed(monkeypatch, tmp_path):
    text = summary(monkeypatch, tmp_path, 3)
    assert [line.split()[-3] for line in text.splitlines() if "part-" in line] == [
        "part-0000.txt",
        "part-0001.txt",
        "part-0002.txt",
    ]
    assert "more" not in text
