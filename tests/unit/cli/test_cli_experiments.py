"""`pier experiment ...` on the test's own PIER_HOME and the fake backend in its
rated mode: run works the experiment here to its end, show/list/export read it
back, a bad matrix exits 2 naming the field, and resume of a finished
experiment starts nothing again."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.lifecycle.service import Services

runner = CliRunner()
RUNBOOK = '---\nagent: script\nimage: pier-fake:latest\nsnapshot: ""\n---\n# r\n\n```bash\necho pier-fake-success-rate={{rate}}\n```\n'


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "fake-rated")
    monkeypatch.setenv("PIER_EXPERIMENT_POLL_SEC", "0.1")
    monkeypatch.setenv("PIER_SWEEP_FOREIGN", "false")
    (tmp_path / "RUNBOOK.md").write_text(RUNBOOK)
    (tmp_path / "rates.jsonl").write_text('{"rate": 0}\n{"rate": 1}\n')
    (tmp_path / "experiment.yaml").write_text(
        "name: rates\nrunbook: RUNBOOK.md\nmatrix:\n  dataset: rates.jsonl\nattempts: 3\nconcurrency: 3\n"
    )
    store = Services().store
    store.create_collection("c")
    store.close()
    return tmp_path


def pier(*args: str):
    return runner.invoke(app, ["experiment", *args])


def said(result) -> str:
    """The output as one line (the console wraps long messages)."""
    return " ".join(result.output.split())


def test_run_show_list_export_resume(folder: Path) -> None:
    ran = pier("run", str(folder / "experiment.yaml"), "--collection", "c")
    assert ran.exit_code == 0, ran.output
    assert "2 cell(s) x 3 attempt(s) = 6 run(s)" in said(ran)
    listed = json.loads(pier("list", "--json").output)
    assert [(e["name"], e["status"]) for e in listed] == [("rates", "completed")]
    experiment_id = listed[0]["id"]

    shown = json.loads(pier("show", experiment_id, "--json").output)
    cells = shown["results"]["cells"]
    assert [(c["key"], c["attempts"], c["successes"]) for c in cells] == [("row0", 3, 0), ("row1", 3, 3)]
    table = pier("show", experiment_id)
    assert table.exit_code == 0 and "row1" in table.output and "differs" in table.output

    rows = list(csv.DictReader(io.StringIO(pier("export", experiment_id, "--format", "csv").output)))
    assert len(rows) == 6 and sorted(r["success"] for r in rows) == ["False"] * 3 + ["True"] * 3
    jsonl = pier("export", experiment_id, "--format", "jsonl").output.splitlines()
    assert len(jsonl) == 6
    atif = [
        json.loads(line) for line in pier("export", experiment_id, "--format", "atif").output.splitlines()
    ]
    assert len(atif) == 6 and {t["agent"]["name"] for t in atif} == {"script"}

    again = pier("resume", experiment_id)
    assert again.exit_code == 2 and "only a cancelled or stopped one can be resumed" in said(again)
    store = Services().store
    assert len(store.attempts(experiment_id)) == 6


def test_a_bad_matrix_exits_2_naming_the_field(folder: Path) -> None:
    (folder / "bad.yaml").write_text(
        "name: bad\nrunbook: RUNBOOK.md\nmatrix:\n  vars: [{rate: 1}, {speed: 2}]\nattempts: 4\n"
    )
    refused = pier("run", str(folder / "bad.yaml"), "--collection", "c")
    assert refused.exit_code == 2
    assert "matrix.vars[1]" in said(refused) and "it would start 8 run(s)" in said(refused)
    assert pier("list", "--json").output.strip() == "[]"


def test_export_refuses_an_unknown_format(folder: Path) -> None:
    assert pier("export", "x", "--format", "xml").exit_code == 2
