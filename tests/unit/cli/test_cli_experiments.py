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
from pier.lifecycle.start import Services
from pier.settings import get_settings

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


CODEX = '---\nagent: codex\nmodel: gpt-5\nimage: pier-fake:latest\nsnapshot: ""\n---\n# r\n\nSay {{rate}}.\n'


def test_run_takes_the_callers_keys_as_pier_run_does(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On main, with OPENAI_API_KEY exported, `pier experiment run ... --collection c`
    refused 'needs the API key in OPENAI_API_KEY' (exit 2) until the key was
    PATCHed into the collection's environment."""
    (folder / "RUNBOOK.md").write_text(CODEX)
    monkeypatch.setenv("PIER_GATEWAY", "false")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    get_settings.cache_clear()
    refused = pier("run", str(folder / "experiment.yaml"), "--collection", "c")
    assert refused.exit_code == 2 and "needs the API key in OPENAI_API_KEY" in said(refused)

    key = "sk-caller-key-1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    ran = pier("run", str(folder / "experiment.yaml"), "--collection", "c")
    assert ran.exit_code == 0, ran.output
    store = Services().store
    runs, _ = store.list_runs(collection="c", limit=100)
    assert len(runs) == 6, {(r.failed_stage, r.outcome, r.error) for r in runs}
    assert not [r.error for r in runs if "API key" in (r.error or "")]
    assert all(key not in r.model_dump_json() for r in runs)  # given to the runs, never stored
    assert store.list_env_names("c") == []


def test_collection_env_set_list_unset_never_prints_a_value(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-from-the-shell-0987654321"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    env = lambda *args: runner.invoke(app, ["collection", "env", *args])  # noqa: E731

    done = env("set", "c", "OPENAI_API_KEY", "TOPIC=rust")
    assert done.exit_code == 0, done.output
    assert secret not in done.output and "rust" not in done.output.replace("TOPIC", "")
    listed = env("list", "c", "--json")
    assert [json.loads(line)["name"] for line in listed.output.splitlines()] == ["OPENAI_API_KEY", "TOPIC"]
    assert secret not in listed.output
    stored = Services().store.get_env_encrypted("c")
    assert secret not in stored["OPENAI_API_KEY"]  # encrypted at rest

    missing = env("set", "c", "NOT_EXPORTED_ANYWHERE")
    assert missing.exit_code == 2 and "is not set in your environment" in said(missing)
    bad = env("set", "c", "1BAD=x")
    assert bad.exit_code == 2 and "is not a variable name" in said(bad)
    assert env("set", "nope", "TOPIC=x").exit_code != 0

    assert env("unset", "c", "TOPIC").exit_code == 0
    assert Services().store.list_env_names("c") == ["OPENAI_API_KEY"]
    gone = env("unset", "c", "TOPIC")
    assert gone.exit_code == 2 and "has no TOPIC" in said(gone)


def test_experiment_changes_are_audited_as_the_clis_other_writes(folder: Path) -> None:
    """On main, `pier experiment run/cancel/resume` wrote no audit entry."""
    ran = pier("run", str(folder / "experiment.yaml"), "--collection", "c", "--detach")
    assert ran.exit_code == 0, ran.output
    (listed,) = json.loads(pier("list", "--json").output)
    assert pier("cancel", listed["id"]).exit_code == 0
    (folder / "bad.yaml").write_text(
        "name: bad\nrunbook: RUNBOOK.md\nmatrix:\n  vars: [{rate: 1}, {speed: 2}]\n"
    )
    assert pier("run", str(folder / "bad.yaml"), "--collection", "c").exit_code == 2
    assert pier("cancel", "no-such-experiment").exit_code != 0
    found = [(e.action, e.collection, e.object_id, e.outcome, e.status, e.source)
             for e in reversed(Services().store.list_audit(limit=20))]  # fmt: skip
    assert found == [
        ("cli experiment run", "c", listed["id"], "ok", 200, "cli"),
        ("cli experiment cancel", "c", listed["id"], "ok", 200, "cli"),
        ("cli experiment run", "c", None, "refused", 422, "cli"),
        ("cli experiment cancel", None, "no-such-experiment", "refused", 404, "cli"),
    ]


def test_collection_env_changes_are_audited_by_name_only(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On main, `pier collection env set/unset` wrote no audit entry."""
    env = lambda *args: runner.invoke(app, ["collection", "env", *args])  # noqa: E731
    assert env("set", "c", "TOPIC=very-secret-value").exit_code == 0
    assert env("unset", "c", "TOPIC").exit_code == 0
    made, removed = reversed(Services().store.list_audit(limit=2))
    assert (made.action, made.target["set"], made.object_id) == ("cli collection env set", ["TOPIC"], "c")
    assert (removed.action, removed.target["removed"]) == ("cli collection env unset", ["TOPIC"])
    assert "very-secret-value" not in made.model_dump_json()
