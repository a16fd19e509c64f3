"""The server's sweep deletes the scratch folders a run's process left when it
died before publishing, and never one a run still works in."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from pier.db import Store
from pier.lifecycle.background import clear_scratch
from pier.record import RunStatus, Trajectory, utcnow
from pier.settings import Settings


def scratch(root: Path, tid: str, age_sec: float = 0) -> Path:
    folder = root / tid
    (folder / "outputs" / "results").mkdir(parents=True)
    (folder / "outputs" / "results" / "out.txt").write_text("x")
    (folder / "inputs").mkdir()  # copies of stored inputs
    then = time.time() - age_sec
    os.utime(folder, (then, then))
    return folder


def test_ended_and_stale_unknown_scratch_folders_go_and_live_ones_stay(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, sweep_grace_sec=300)
    store = Store.open(f"sqlite:///{tmp_path / 'pier.db'}")
    ended, running = Trajectory.new(uuid.uuid4().hex, "c", "t"), Trajectory.new(uuid.uuid4().hex, "c", "t")
    for record in (ended, running):
        store.create_run(record)
    ended.finish(RunStatus.failed, utcnow(), 1.0)
    store.save_run(ended)
    root = settings.scratch_root
    gone = [
        scratch(root, ended.trajectory_id),
        scratch(root, uuid.uuid4().hex, age_sec=3600),  # no run knows it, long past the grace
    ]
    kept = [
        scratch(root, running.trajectory_id, age_sec=3600),
        scratch(root, uuid.uuid4().hex, age_sec=10),  # unknown, but maybe a run being made
        scratch(root, "not-a-run-id", age_sec=3600),
    ]
    assert clear_scratch(store, settings) == 2
    assert [f.exists() for f in gone] == [False] * 2
    assert all(f.exists() for f in kept)
    store.close()
