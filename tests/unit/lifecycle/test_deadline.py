"""Deadline-aware runs on the fake backend: the agent's environment carries
PIER_DEADLINE, its exec gets PIER_KILL_GRACE_SEC as its grace, and a model's
instruction ends saying how long it has."""

from __future__ import annotations

import time

import pytest

from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.fake import FakeBackend, FakeEngine, Script
from pier.settings import Settings
from pier.tasks import task_from_runbook

SCRIPT_RUNBOOK = "---\nagent: script\ntimeout_sec: 300\n---\n# t\n\n```bash\ntrue\n```\n"
MODEL_RUNBOOK = "---\nagent: claude-code\ntimeout_sec: 600\n---\n# t\n\nWrite the answer.\n"


@pytest.fixture
def engine(monkeypatch) -> FakeEngine:
    monkeypatch.setattr("pier.sandbox._registered", {})
    return FakeEngine()


def start(tmp_path, engine, script, text, env=None, **settings):
    register_backend("fake-deadline", lambda s: FakeBackend(s, engine=engine, program=script))
    settings = Settings(
        home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-deadline", gateway=False, **settings
    )
    task = task_from_runbook(parse(text))
    return run(Services(settings), RunRequest(collection="tests", task_name="t", task=task, env=env or {}))


def test_the_agent_gets_its_deadline_and_its_grace(tmp_path, engine):
    script = Script().on(r"script\.sh", lambda sandbox, call: sandbox.put_files("/app/results", {"a": b"x"}))
    began = int(time.time())
    record = start(tmp_path, engine, script, SCRIPT_RUNBOOK, kill_grace_sec=7)
    assert record.success, record.error
    (call,) = [c for c in script.calls if "script.sh" in c.text]
    assert call.timeout == 300 and call.grace == 7
    assert began + 300 <= int(call.env["PIER_DEADLINE"]) <= int(time.time()) + 300


def test_no_grace_is_an_immediate_kill(tmp_path, engine):
    script = Script()
    start(tmp_path, engine, script, SCRIPT_RUNBOOK, kill_grace_sec=0)
    (call,) = [c for c in script.calls if "script.sh" in c.text]
    assert call.grace is None and "PIER_DEADLINE" in call.env


def test_a_models_instruction_says_how_long_it_has(tmp_path, engine):
    prompts: list[str] = []

    def read_prompt(sandbox, call):
        prompts.append(sandbox.host_path("/run/pier/prompt.md").read_text())

    script = Script().on(r"claude -p", read_prompt)
    start(tmp_path, engine, script, MODEL_RUNBOOK, env={"ANTHROPIC_API_KEY": "k"}, kill_grace_sec=15)
    (prompt,) = prompts
    assert prompt.startswith("# t\n\nWrite the answer.")
    assert "600 s (10 min)" in prompt and "$PIER_DEADLINE" in prompt and "SIGKILL 15 s later" in prompt
