"""A whole run through the real lifecycle on the fake backend: no Docker, the
agent's command answered by a Script. What orchestration tests build on."""

from __future__ import annotations

import pytest

from pier.lifecycle.service import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.fake import FakeBackend, FakeEngine, Script, replied
from pier.settings import Settings
from pier.tasks import step_override, task_from_runbook

RUNBOOK = """---
agent: script
---
# test

```bash
echo hello > /app/results/out.txt
```
"""


def write_results(sandbox, call):
    sandbox.put_files("/app/results", {"out.txt": b"hello\n"})


@pytest.fixture
def engine(tmp_path, monkeypatch) -> FakeEngine:
    monkeypatch.setattr("pier.sandbox._registered", {})
    return FakeEngine()


def start(tmp_path, engine: FakeEngine, script: Script, **step: object):
    register_backend("fake-run", lambda settings: FakeBackend(settings, engine=engine, program=script))
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-run")
    task = task_from_runbook(parse(RUNBOOK))
    if step:
        task = task.model_copy(update={"step_configs": {"run": step_override(task.run_step(), **step)}})
    request = RunRequest(collection="tests", task_name="t", task=task)
    return run(Services(settings), request)


def test_a_run_completes_on_the_fake_and_deletes_its_sandbox(tmp_path, engine):
    script = Script().on(r"script\.sh", write_results)
    record = start(tmp_path, engine, script)
    assert record.status == RunStatus.completed, record.error
    assert [f.path for f in record.outputs.results_files] == ["out.txt"]
    assert engine.sandboxes == {}, "the run's sandbox was not deleted"
    agent_calls = [c for c in script.calls if "script.sh" in c.text]
    assert len(agent_calls) == 1 and agent_calls[0].workdir == "/app"


def test_an_agent_killed_for_memory_fails_the_run_saying_oom(tmp_path, engine):
    def out_of_memory(sandbox, call):
        sandbox.oom = True
        return replied("Killed", exit_code=137)

    record = start(tmp_path, engine, Script().on(r"script\.sh", out_of_memory))
    assert record.status == RunStatus.failed and record.error is not None
    assert record.failed_stage == "run_agent" and "out of memory" in record.error
    assert engine.sandboxes == {}


def test_a_run_needing_a_capability_the_backend_lacks_fails_at_create(tmp_path, engine):
    script = Script()
    record = start(tmp_path, engine, script, network_enabled=False)
    assert record.status == RunStatus.failed and record.error is not None
    assert record.failed_stage == "create"
    assert "network_off" in record.error and "'fake'" in record.error
    assert engine.sandboxes == {} and script.calls == [], "nothing may be created or run"


def test_soft_ceilings_the_fake_cannot_enforce_become_run_warnings(tmp_path, engine):
    record = start(tmp_path, engine, Script().on(r"script\.sh", write_results))
    assert any("cpu_limit" in w for w in record.outputs.warnings)
    assert not any("disk" in w for w in record.outputs.warnings), "the fake enforces the disk limit"
