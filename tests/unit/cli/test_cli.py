"""CLI behaviour that needs no Docker: bad input exits 2 with a message naming the fix."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.cli.options import parse_vars
from pier.errors import InputError
from tests.conftest import corpus_or_skip

runner = CliRunner()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "RUNBOOK.md"
    path.write_text(text)
    return path


def test_parse_vars():
    assert parse_vars(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_vars(["novalue"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--var", "oops"], "NAME=VALUE"),
        (["--memory", "lots"], "memory size"),
        (["--agent", "nobody"], "agent 'nobody' is not available"),
        (["--file", "/no/such/file.csv"], "does not exist"),
    ],
)
def test_bad_input_exits_2_before_any_sandbox(tmp_path, args, message):
    path = write(tmp_path, "---\nagent: script\n---\n```bash\ntrue\n```\n")
    result = runner.invoke(app, ["run", str(path), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_malformed_runbook_exits_2_naming_the_line(tmp_path):
    path = write(tmp_path, "---\nagent: script\nmodel: [x\n---\nbody\n")
    result = runner.invoke(app, ["run", str(path)])
    assert result.exit_code == 2
    assert f"{path}:3" in result.output


def test_validate_judges_the_corpus_as_run_would():
    result = runner.invoke(app, ["validate", str(corpus_or_skip())], env={"COLUMNS": "300"})
    # Every runbook the platform publishes passes. The one whose model_provider is
    # for its own tools (replicate) runs on the agent's provider, and says so.
    assert result.exit_code == 0, result.output[-2000:]
    assert "115 runbook(s), 0 with errors" in result.output
    assert "model_provider 'replicate' is not a provider pier runs agents on" in result.output


def test_validate_fails_a_broken_runbook(tmp_path):
    write(tmp_path, "---\nagent: script\ntimeout_sec: -1\n---\nbody\n")
    bad = runner.invoke(app, ["validate", str(tmp_path)])
    assert bad.exit_code == 1
    assert "timeout_sec" in bad.output and "1 with errors" in bad.output


def test_validate_reports_unknown_keys_and_unfilled_variables(tmp_path):
    write(tmp_path, "---\nagent: script\ncolour: red\n---\n```bash\necho {{x}}\n```\n")
    result = runner.invoke(app, ["validate", str(tmp_path / "RUNBOOK.md")])
    assert result.exit_code == 0
    assert "unknown frontmatter key 'colour'" in result.output
    assert "unfilled variable {{x}} left as written" in result.output


def test_validate_refuses_what_run_refuses(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cases = {
        "no-agent": ("---\ntitle: x\n---\n```bash\ntrue\n```\n", "names no agent"),
        "no-shell-block": ("---\nagent: script\n---\nJust prose.\n", "no ```bash or ```sh block"),
    }
    for name, (text, message) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        path = write(folder, text)
        validated = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "300"})
        ran = runner.invoke(app, ["run", str(path)], env={"COLUMNS": "300"})
        assert validated.exit_code == 1 and message in validated.output, (name, validated.output)
        assert ran.exit_code == 2 and message in ran.output, (name, ran.output)


def test_validate_warns_when_only_this_machine_lacks_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    path = write(tmp_path, "---\nagent: claude-code\n---\nWrite a haiku.\n")
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "ANTHROPIC_API_KEY" in result.output


def test_a_model_provider_only_media_steps_use_is_the_runbooks_own_tools_not_an_error(tmp_path):
    """`model_provider: replicate` (the corpus's pelican-persona): pier calls
    Replicate for a workflow's image steps, but runs no agent on it; the runbook
    names the model its own tools call, so validate warns and passes (it said
    'agent claude-code cannot use model_provider replicate' once replicate was
    in the provider table)."""
    path = write(
        tmp_path,
        "---\nagent: claude-code\nmodel: google/nano-banana\nmodel_provider: replicate\nsnapshot: ''\n---\n# Draw\n",
    )
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "model_provider 'replicate' is not a provider pier runs agents on" in result.output
