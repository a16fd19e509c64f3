"""Nothing wrong is accepted silently: a misspelt --var, a variable with no value,
two attached files landing on the same path, a task no run could start: each is
refused before any sandbox exists (exit 2), saying what to do."""

import zipfile
from pathlib import Path

from typer.testing import CliRunner

from pier.cli import app
from pier.lifecycle.start import Services

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
WIDE = {"COLUMNS": "400"}

PERSON = """---
agent: script
snapshot: ""
vars:
  person:
---
```bash
echo "hello {{person}}" > {{results_dir}}/out.txt
```
"""


def test_an_unknown_var_exits_2_naming_the_runbooks_variables():
    result = runner.invoke(app, ["run", str(EXAMPLES / "hello"), "--var", "nme=x"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "this runbook has no variable 'nme' (its variables: name)" in result.output
    assert "--allow-extra-vars" in result.output


def test_a_variable_without_a_value_exits_2_at_run_and_validate_warns(tmp_path):
    (tmp_path / "RUNBOOK.md").write_text(PERSON)
    ran = runner.invoke(app, ["run", str(tmp_path)], env=WIDE)
    assert ran.exit_code == 2, ran.output
    assert "variable {{person}} has no value: give it (pier run --var person=VALUE" in ran.output
    validated = runner.invoke(app, ["validate", str(tmp_path)], env=WIDE)
    assert validated.exit_code == 0, validated.output
    assert "{{person}} has no value" in validated.output


def test_a_zip_entry_and_a_file_on_the_same_path_exit_2_naming_both(tmp_path):
    with zipfile.ZipFile(tmp_path / "data.zip", "w") as archive:
        archive.writestr("notes.txt", "from the zip")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("from b/")
    args = [
        "run",
        str(EXAMPLES / "hello"),
        "--file",
        str(tmp_path / "data.zip"),
        "--file",
        str(tmp_path / "b" / "notes.txt"),
    ]
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert (
        f"data.zip (entry notes.txt) and {tmp_path / 'b' / 'notes.txt'} would both be /app/assets/notes.txt"
        in result.output
    )


def test_task_push_refuses_a_task_no_run_could_start():
    Services().store.create_collection("team")
    pushed = runner.invoke(app, ["task", "push", str(EXAMPLES / "checks"), "--collection", "team"], env=WIDE)
    assert pushed.exit_code == 2, pushed.output
    assert "./tests" in pushed.output and "local" in pushed.output
    assert Services().store.list_tasks("team") == []
    ok = runner.invoke(app, ["task", "push", str(EXAMPLES / "hello"), "--collection", "team"], env=WIDE)
    assert ok.exit_code == 0, ok.output
