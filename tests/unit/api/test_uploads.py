"""Uploads expire: what POST /sandbox/upload stored and no run needs is deleted
once PIER_UPLOAD_TTL_SEC has passed; a run naming it is told it expired."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pier.db import Store
from pier.lifecycle.uploads import expire_uploads, expired_message, uploads_in_use
from pier.record import Trajectory
from pier.settings import Settings
from pier.storage.local import LocalStorage

HOUR = 3600.0
TTL = 24 * HOUR


def upload(storage: LocalStorage, collection: str, age_sec: float) -> str:
    """An upload of one file, made age_sec ago; its API path."""
    made = storage.upload_dir(collection)
    (made.path / "data.csv").write_text("a,b\n")
    then = time.time() - age_sec
    os.utime(made.path, (then, then))
    return f"{collection}/.uploads/{made.upload_id}/data.csv"


def folder(storage: LocalStorage, api_path: str) -> Path:
    return storage.root / Path(api_path).parent


def a_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'pier.db'}")


def pending_run_naming(store: Store, collection: str, *paths: str, in_task: bool = False) -> None:
    record = Trajectory.new(os.urandom(16).hex(), collection, "t")
    params = {"file_paths": list(paths)}
    request = {
        "collection": collection,
        "task_name": "t",
        "task": {"init_params": params if in_task else {}},
        "run_params": {} if in_task else params,
    }
    store.enqueue_run(record, request)


def test_old_unused_uploads_go_and_fresh_or_needed_ones_stay(tmp_path):
    storage, store = LocalStorage(tmp_path / "storage"), a_store(tmp_path)
    stale = upload(storage, "team-a", age_sec=TTL + HOUR)
    fresh = upload(storage, "team-a", age_sec=TTL - HOUR)
    needed = upload(storage, "team-b", age_sec=TTL + HOUR)
    needed_by_task = upload(storage, "team-b", age_sec=10 * TTL)
    pending_run_naming(store, "team-b", needed)
    pending_run_naming(store, "team-b", needed_by_task, in_task=True)

    assert expire_uploads(storage, store, TTL) == 1
    assert not folder(storage, stale).exists()
    for kept in (fresh, needed, needed_by_task):
        assert (storage.root / kept).is_file(), kept
    assert expire_uploads(storage, store, TTL) == 0


def test_once_the_run_has_ended_its_upload_can_expire(tmp_path):
    storage, store = LocalStorage(tmp_path / "storage"), a_store(tmp_path)
    used = upload(storage, "team-a", age_sec=TTL + HOUR)
    pending_run_naming(store, "team-a", used)
    assert expire_uploads(storage, store, TTL) == 0
    (tid,) = store.run_requests()
    store.drop_run_request(tid)  # the run ended
    assert uploads_in_use(store) == set()
    assert expire_uploads(storage, store, TTL) == 1 and not folder(storage, used).exists()


def test_nothing_to_expire_on_a_new_machine(tmp_path):
    assert expire_uploads(LocalStorage(tmp_path / "none"), a_store(tmp_path), TTL) == 0


def test_a_missing_upload_file_is_explained_as_expired():
    path = "team-a/.uploads/" + "0" * 32 + "/data.csv"
    message = expired_message(path, TTL)
    assert message is not None and path in message and "expired" in message
    assert "PIER_UPLOAD_TTL_SEC" in message and "/sandbox/upload" in message
    assert expired_message("team-a/report/run/results/x.md", TTL) is None


def test_the_default_time_to_live_is_a_day():
    assert Settings().upload_ttl_sec == 24 * HOUR
