"""`pier run` creates its sandbox while its database is still opening (the
SQLAlchemy import and the schema check overlap the engine's work), and the run
is stored all the same: its record, every stage and every log line, in order."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.db import Store
from pier.record import Trajectory
from pier.sandbox.fake import FakeBackend

ROOT = Path(__file__).resolve().parents[3]
WAIT_SEC = 20  # how long the database's opening waits for the sandbox before giving up


@pytest.fixture
def created_first(monkeypatch, pier_home: Path) -> dict[str, bool]:
    """Store.open waits for the fake's create (up to WAIT_SEC) and says whether it came."""
    monkeypatch.setenv("PIER_HOME", str(pier_home))
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_TEST_AGENT_LINES", "3")  # the agent's live lines: tick 1, tick 2, tick 3
    monkeypatch.delenv("PIER_DATABASE_URL", raising=False)
    created = threading.Event()
    seen: dict[str, bool] = {}
    real_open, real_create = Store.open.__func__, FakeBackend.create  # type: ignore[attr-defined]

    def slow_open(cls, url: str) -> Store:
        seen.setdefault("created_before_open", created.wait(WAIT_SEC))
        return real_open(cls, url)

    def create(self, spec):
        created.set()
        return real_create(self, spec)

    monkeypatch.setattr(Store, "open", classmethod(slow_open))
    monkeypatch.setattr(FakeBackend, "create", create)
    return seen


def test_the_sandbox_is_created_while_the_database_opens(created_first, pier_home):
    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "hello"), "--json"])
    assert result.exit_code == 0, result.output
    assert created_first == {"created_before_open": True}
    record = json.loads(result.stdout)
    assert record["status"] == "completed"
    with Store.open(f"sqlite:///{pier_home / 'pier.db'}") as store:
        stored = store.get_run(record["trajectory_id"])
        lines = [event.line for event in store.events(record["trajectory_id"])]
    assert stored.status.value == "completed"
    ended = Trajectory.model_validate(record)  # the record as it ended, not an earlier write
    assert (stored.ended, stored.duration_seconds) == (ended.ended, ended.duration_seconds)
    assert [(s.name, s.status, s.duration_seconds) for s in stored.stages] == [
        (s.name, s.status, s.duration_seconds) for s in ended.stages
    ]
    assert len(stored.stages) == 8 and all(stage.status.value == "completed" for stage in stored.stages)
    # the lines written while the database was opening come first, in order
    assert lines[0].startswith("agent script")
    assert any(line.startswith("sandbox ") and " up (" in line for line in lines)
    ticks = [line for line in lines if line.startswith("tick ")]
    assert ticks == ["tick 1", "tick 2", "tick 3"]
    assert lines[-1].startswith("run completed in ")
