"""A whole run through the real lifecycle on the fake backend: no Docker, the
agent's command answered by a Script. What orchestration tests build on."""

from __future__ import annotations

import pytest

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.base import ExecResult
from pier.sandbox.fake import FakeBackend, FakeEngine, Script, replied
from pier.settings import Settings
from pier.tasks import step_override, task_from_runbook
from pier.telemetry import metrics

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


def filled_its_disk(sandbox, call):
    """What the engine's stop looks like to the agent: killed, its sandbox
    saying which limit it reached."""
    sandbox.reached = "the sandbox filled its disk limit of 1M and was stopped"
    return replied("", exit_code=137)


def events(tmp_path, record) -> list[str]:
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-run")
    return [e.line for e in Services(settings).store.events(record.trajectory_id)]


@pytest.mark.parametrize(
    ("reply", "outcome", "stage"),
    [
        (write_results, "success", None),
        (replied(""), "no_results", "collect"),
        (replied("boom", exit_code=1), "agent_failed", "run_agent"),
        (lambda sandbox, call: ExecResult(124, "", 1.0, timed_out=True), "timed_out", "run_agent"),
        (filled_its_disk, "limit_reached", "run_agent"),
    ],
    ids=["success", "wrote-nothing", "exit-1", "timeout", "disk-limit"],
)
def test_each_way_an_agent_ends_is_its_own_outcome_on_the_record(tmp_path, engine, reply, outcome, stage):
    """The record's outcome is what experiments, metrics and traces count: an
    agent that wrote nothing is its own outcome at collect, never pier's, and a
    timeout is not a plain failure in the metrics either."""
    status = "completed" if outcome == "success" else "failed"
    labels = {"collection": "-", "status": status, "failed_stage": stage or "", "outcome": outcome}
    before = metrics.REGISTRY.get_sample_value("pier_runs_ended_total", labels) or 0
    record = start(tmp_path, engine, Script().on(r"script\.sh", reply))
    assert (record.outcome, record.failed_stage) == (outcome, stage), record.error
    assert metrics.REGISTRY.get_sample_value("pier_runs_ended_total", labels) == before + 1


def test_a_capability_the_backend_lacks_is_the_runs_input_not_infrastructure(tmp_path, engine):
    record = start(tmp_path, engine, Script(), network_enabled=False)
    assert record.outcome == "invalid"


def test_a_set_up_failure_ends_the_run_there_naming_only_itself(tmp_path, engine):
    """An image without the core tools: set up fails, and the run ends there:
    no 'collect failed: ... nothing in /app/results' after it (on main the log
    ended on that, the wrong cause), no checks, the first failure only."""
    script = Script().on(r"command -v", replied("tee\ntimeout\n"))
    record = start(tmp_path, engine, script)
    assert record.status == RunStatus.failed and record.failed_stage == "setup"
    assert "lacks what every sandbox needs (tee, timeout)" in (record.error or "")
    assert record.outcome == "invalid"
    stages = {s.name: s.status.value for s in record.stages}
    assert stages["run_agent"] == stages["collect"] == stages["check"] == "skipped", stages
    log = events(tmp_path, record)
    failures = [line for line in log if " failed: " in line]
    assert failures == [f"setup failed: {record.error}"], failures
    assert not any("nothing in /app/results" in line for line in log)
    assert engine.sandboxes == {}


VOLUMES_RUNBOOK = """---
agent: script
volumes:
  datasets: {path: /data, read_only: true}
  cache: {path: /root/.cache}
---
# test

```bash
echo hello > /app/results/out.txt
```
"""


def test_the_run_record_names_the_volumes_its_sandbox_mounted(tmp_path, engine):
    """What the run page shows (docs/sessions.md#volumes): read from the record,
    the mounts the sandbox was created with."""
    from pier.lifecycle.volumes import engine_name
    from pier.record import VolumeRecord
    from pier.sandbox.base import Capabilities

    created = []

    class WithVolumes(FakeBackend):
        def create(self, spec):
            created.append(spec.volumes)
            return super().create(spec)

    capabilities = Capabilities(memory_limit=True, disk_quota=True, volumes=True)
    register_backend(
        "fake-vol",
        lambda settings: WithVolumes(
            settings,
            engine=engine,
            program=Script().on(r"script\.sh", write_results),
            capabilities=capabilities,
        ),
    )
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-vol")
    task = task_from_runbook(parse(VOLUMES_RUNBOOK))
    record = run(Services(settings), RunRequest(collection="tests", task_name="t", task=task))
    assert record.status == RunStatus.completed, record.error
    assert [(m.name, m.path, m.read_only) for m in created[0]] == [
        (engine_name("tests", "datasets"), "/data", True),
        (engine_name("tests", "cache"), "/root/.cache", False),
    ]
    assert record.outputs.sandbox.volumes == [
        VolumeRecord(name="datasets", path="/data", read_only=True),
        VolumeRecord(name="cache", path="/root/.cache", read_only=False),
    ]
    stored = Services(settings).store.get_run(record.trajectory_id, "tests")
    assert stored.outputs.sandbox.volumes == record.outputs.sandbox.volumes, "the stored record lost them"
