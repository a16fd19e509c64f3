"""Which runs wait for an agent layer's build, on the fake backend: a run with
open network that finds no layer installs in its sandbox and starts the build
after a successful install; a run without open network waits for the build."""

from __future__ import annotations

import pytest

from pier.agents.script import ScriptAgent
from pier.errors import StageError
from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.base import Capabilities, Layer, LayerRecipe, LineSink
from pier.sandbox.fake import FakeBackend, FakeEngine, Script
from pier.settings import Settings
from pier.tasks import step_override, task_from_runbook

RUNBOOK = "---\nagent: script\n---\n# test\n\n```bash\ntrue\n```\n"
RECIPE = LayerRecipe("script", "1.0", "true\n")


class LayeringBackend(FakeBackend):
    """The fake, with layers: none exists; says how it was asked."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[str] = []

    def ensure_layer(self, image: str, recipe: LayerRecipe, log: LineSink, timeout: float, wait: bool = True):
        self.asked.append(f"ensure wait={wait}")
        return Layer(image, built_s=1.0) if wait else Layer("pier-agent/script:x", ready=False)

    def start_layer_build(self, image: str, recipe: LayerRecipe, timeout: float) -> bool:
        self.asked.append("start")
        return True


@pytest.fixture
def backend(monkeypatch) -> LayeringBackend:
    monkeypatch.setattr("pier.sandbox._registered", {})
    script = Script().on(r"script\.sh", lambda sandbox, call: sandbox.put_files("/app/results", {"a": b"1"}))
    capabilities = Capabilities(memory_limit=True, disk_quota=True, network_off=True)
    made = LayeringBackend(
        Settings(ca_bundle=None), engine=FakeEngine(), program=script, capabilities=capabilities
    )
    register_backend("fake-layers", lambda settings: made)
    monkeypatch.setattr(ScriptAgent, "layer", lambda self: RECIPE)
    return made


def start(tmp_path, **step: object):
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-layers")
    task = task_from_runbook(parse(RUNBOOK))
    task = task.model_copy(update={"step_configs": {"run": step_override(task.run_step(), **step)}})
    record = run(Services(settings), RunRequest(collection="tests", task_name="t", task=task))
    log = [e.line for e in Services(settings).store.events(record.trajectory_id)]
    return record, [line for line in log if line.startswith("agent layer:")]


def test_a_run_with_open_network_installs_then_starts_the_build(tmp_path, backend, monkeypatch):
    installed: list[str] = []
    monkeypatch.setattr(ScriptAgent, "install", lambda self, sandbox, log, timeout: installed.append("yes"))
    record, said = start(tmp_path)
    assert record.status == RunStatus.completed, record.error
    assert backend.asked == ["ensure wait=False", "start"] and installed == ["yes"]
    assert (
        said[0]
        == "agent layer: not built yet (script 1.0, pier-agent/script:x); the sandbox installs the CLI"
    )
    assert said[1].startswith("agent layer: building in the background; installed in the sandbox in ")


def test_a_failed_install_starts_no_build(tmp_path, backend, monkeypatch):
    def fail(self, sandbox, log, timeout):
        raise StageError("setup", "installing script 1.0 failed")

    monkeypatch.setattr(ScriptAgent, "install", fail)
    record, _ = start(tmp_path)
    assert record.status == RunStatus.failed and record.failed_stage == "setup"
    assert backend.asked == ["ensure wait=False"]


def test_a_run_without_network_waits_for_the_build(tmp_path, backend, monkeypatch):
    installed: list[str] = []
    monkeypatch.setattr(ScriptAgent, "install", lambda self, sandbox, log, timeout: installed.append("yes"))
    record, said = start(tmp_path, network_enabled=False)
    assert backend.asked == ["ensure wait=True"], record.error
    assert len(said) == 1 and said[0].startswith("agent layer: built in 1.0 s (script 1.0, "), said
    assert record.status == RunStatus.completed and installed == [], "a run on its layer installed"


def test_an_image_that_carries_the_cli_at_its_pin_makes_no_layer_and_installs_nothing(
    tmp_path, backend, monkeypatch
):
    """A built snapshot's pier.agents label (written by a build whose install
    verified each version) says which CLIs it has: the run uses it as it is."""
    installed: list[str] = []
    monkeypatch.setattr(ScriptAgent, "install", lambda self, sandbox, log, timeout: installed.append("yes"))
    monkeypatch.setattr(
        backend, "image_labels", lambda ref: {"pier.agents": "codex=1,script=1.0"}, raising=False
    )
    record, said = start(tmp_path)
    assert record.status == RunStatus.completed, record.error
    assert backend.asked == [] and installed == [] and said == []
    log = [e.line for e in Services(Settings(home=tmp_path / "home")).store.events(record.trajectory_id)]
    assert "agent: script 1.0 is in the image; nothing to install" in log


def test_an_image_with_the_cli_at_another_version_still_gets_the_layer(tmp_path, backend, monkeypatch):
    monkeypatch.setattr(ScriptAgent, "install", lambda self, sandbox, log, timeout: None)
    monkeypatch.setattr(backend, "image_labels", lambda ref: {"pier.agents": "script=0.9"}, raising=False)
    start(tmp_path)
    assert backend.asked == ["ensure wait=False", "start"]
