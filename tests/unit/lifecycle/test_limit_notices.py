"""The engine lowering the default CPUs is said once per machine, not on every run; a value the run asked for is always
warned about."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pier.lifecycle.context import RunContext
from pier.lifecycle.notices import limit_of
from pier.lifecycle.plan import RunInputs
from pier.lifecycle.stages import create, prepare
from pier.record import Trajectory
from pier.runbook import parse
from pier.sandbox.base import Capabilities, SandboxSpec
from pier.sandbox.fake import FakeBackend, FakeEngine, FakeSandbox
from pier.settings import Settings
from pier.tasks import task_from_runbook

ENGINE_CPUS = 2


class SmallEngine(FakeBackend):
    """The shared fake backend answering as a 2-CPU Docker engine does: CPUs
    lowered to what it has."""

    def __init__(self) -> None:
        caps = Capabilities(
            network_off=True, memory_limit=True, cpu_limit=True, pids_limit=True, disk_quota=True
        )
        super().__init__(engine=FakeEngine(), capabilities=caps)

    def create(self, spec: SandboxSpec) -> FakeSandbox:
        sandbox = super().create(spec)
        wanted = spec.limits
        sandbox.applied = replace(wanted, cpus=min(wanted.cpus, ENGINE_CPUS))
        notes = []
        if wanted.cpus > ENGINE_CPUS:
            notes.append(f"cpus {wanted.cpus:g} lowered to {ENGINE_CPUS}: the Docker engine has 2 CPU(s)")
        sandbox.notes = tuple(notes)
        return sandbox


def create_a_run(home: Path, front: str = "", **settings: object) -> tuple[Trajectory, list[str]]:
    text = f"---\nagent: script\nimage: local/img:1\nsnapshot: ''\n{front}---\n```bash\ntrue\n```\n"
    lines: list[str] = []
    ctx = RunContext(
        task=task_from_runbook(parse(text)),
        run_params={},
        inputs=RunInputs("t1", "local", "t"),
        record=Trajectory.new("t1", "local", "t"),
        settings=Settings(home=home, **settings),
        backend=SmallEngine(),
        output_dir=home / "out",
        emit=lambda stage, line: lines.append(line),
        save_record=lambda record: None,
    )
    prepare(ctx)
    create(ctx)
    return ctx.record, lines


def engine_warnings(record: Trajectory) -> list[str]:
    return [w for w in record.outputs.warnings if "lowered" in w or "not enforced" in w]


def test_default_limits_the_engine_changes_are_warned_about_once_per_machine(tmp_path):
    first, _ = create_a_run(tmp_path)
    assert len(engine_warnings(first)) == 1
    for _ in range(2):
        again, lines = create_a_run(tmp_path)
        assert engine_warnings(again) == []
        assert not [line for line in lines if line.startswith("warning:")]
        assert any("cpus 4 lowered to 2" in line for line in lines), "the log still says what applies"


def test_limits_the_run_asked_for_are_warned_about_every_time(tmp_path):
    create_a_run(tmp_path)
    asked, _ = create_a_run(tmp_path, front="cpus: 8\n")
    assert engine_warnings(asked) == ["cpus 8 lowered to 2: the Docker engine has 2 CPU(s)"]
    again, _ = create_a_run(tmp_path, front="cpus: 3\n")
    assert engine_warnings(again) == ["cpus 3 lowered to 2: the Docker engine has 2 CPU(s)"]


@pytest.mark.parametrize("cpus", [1, 2])
def test_nothing_is_said_when_the_engine_gives_what_was_asked(tmp_path, cpus):
    record, _ = create_a_run(tmp_path, front=f"cpus: {cpus}\n", disk_limit="")
    assert engine_warnings(record) == []


def test_notes_are_matched_to_their_limit_whatever_the_backend_words_them():
    assert limit_of("cpus 4 lowered to 2: the Docker engine has 2 CPU(s)") == "cpus"
    assert limit_of("4 CPUs not enforced: the 'x' sandbox backend cannot set a CPU limit") == "cpus"
    assert limit_of("disk 10G not enforced: the 'x' sandbox backend cannot set a disk quota") == "disk"
    assert limit_of("4096 processes not enforced: the 'x' backend cannot set a process limit") == "pids"
    assert limit_of("snapshot 'nope' not found") is None
