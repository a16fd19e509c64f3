"""`pier validate` checks a workflow's JSON as the server checks a stored task."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pier.cli import app


def test_validate_reports_every_problem_of_a_workflow_and_passes_the_platforms_example(tmp_path, monkeypatch):
    monkeypatch.setenv("PIER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    good = tmp_path / "simple-chat.json"
    good.write_text(json.dumps({"name": "simple-chat", "workflow": {
        "init_params": {"prompt": "Hello", "model": "gpt-4o-mini"},
        "step_configs": {"chat": {"activity": "litellm_chat", "model_path": "init_params.model",
                                  "system_prompt": "You are a helpful assistant.",
                                  "prompt_path": "init_params.prompt", "temperature": 0.7}},
        "steps": ["chat"]}}))  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({
        "step_configs": {"chat": {"activity": "litellm_chat", "model": "gpt-4o", "prompt_path": "nope.outputs.text",
                                  "temprature": 1},
                         "split": {"activity": "text_split", "text": "x", "chunk_size": 0}},
        "steps": ["chat", "split", "gone"]}))  # fmt: skip
    result = CliRunner().invoke(app, ["validate", str(good), str(bad)])
    out = result.output
    assert result.exit_code == 1, out
    assert f"✓ {good}" in out
    assert "step_configs.chat.prompt_path: path 'nope.outputs.text' reads step 'nope'" in out
    assert "has no parameter 'temprature'" in out
    assert "step_configs.split.chunk_size" in out
    assert "step 'gone' is in steps but has no step_configs entry" in out
