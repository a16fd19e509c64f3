"""The service layer (pier.server.services) on its own, without HTTP: what it
decides for the routes and the pages alike. Who sees what (a collection token
its own, the admin every collection), checks before anything is stored, the
answers a route and a page both render."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from pier.errors import NotFoundError
from pier.record import RunStatus, Trajectory
from pier.server.auth import Caller
from pier.server.build import build_state
from pier.server.errors import Invalid, ServiceError
from pier.server.services import audit, collections, experiments, files, runs, tasks
from pier.server.state import ApiState
from pier.server.tokens import hash_token
from pier.settings import Settings, get_settings

ADMIN = Caller(collection=None, admin=True)
TEAM = Caller(collection="team")
RUNBOOK = """---
agent: script
snapshot: ""
---

Say hello.

```bash
echo hello
```
"""


@pytest.fixture
def state(pier_home, monkeypatch) -> Iterator[ApiState]:
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    get_settings.cache_clear()
    state = build_state(Settings())
    for name in ("team", "other"):
        collections.create(state, name)
    yield state
    state.store.close()


def run(state: ApiState, collection: str, task: str = "t", status=RunStatus.completed, **kw) -> Trajectory:
    record = Trajectory.new(uuid.uuid4().hex, collection, task, **kw)
    record.status = status
    state.store.create_run(record)
    return record


def field(exc: pytest.ExceptionInfo[Invalid]) -> str:
    return ".".join(str(p) for p in exc.value.errors()[0]["loc"])


# collections, tokens, environment


def test_the_admin_sees_every_collection_and_those_with_runs_only(state):
    run(state, "local")  # `pier run`'s runs: no stored collection
    assert [c.name for c in collections.visible(state, ADMIN)] == ["other", "team"]
    assert collections.names(state, ADMIN) == ["local", "other", "team"]
    assert collections.names(state, TEAM) == ["team"]


def test_a_collection_is_created_once(state):
    with pytest.raises(ServiceError) as exc:
        collections.create(state, "team")
    assert exc.value.status == 409 and "POST /api/v1/collections/team/tokens" in exc.value.detail


def test_a_revoked_token_is_forgotten_at_once(state):
    token = collections.issue_token(state, "team", "web")
    state.tokens.add(hash_token(token), "team")  # seen valid: remembered
    (info,) = [t for t in collections.tokens(state, "team") if t.label == "web"]
    collections.revoke_token(state, "team", info.id)
    assert state.tokens.get(hash_token(token)) is None
    assert state.store.collection_for_token_hash(hash_token(token)) is None


def test_an_environment_change_is_checked_whole_before_anything_is_stored(state):
    with pytest.raises(Invalid) as exc:
        collections.change_environment(state, "team", {"GOOD": "1", "1BAD": "2"})
    assert field(exc) == "environment_variables.1BAD"
    assert collections.environment(state, "team") == []
    assert collections.change_environment(state, "team", {"A": "1", "B": "2"}) == ["A", "B"]
    assert collections.change_environment(state, "team", {"A": None}) == ["B"]


def test_the_audit_of_an_environment_change_names_variables_never_values():
    detail = collections.environment_audit({"KEY": "s3cr3t", "OLD": None})
    assert detail == {"set": ["KEY"], "removed": ["OLD"]}


def test_quotas_in_force_are_the_overrides_else_the_defaults(state):
    found = collections.set_quotas(state, "team", {"queued_runs": 3})
    assert found.overrides == {"queued_runs": 3} and found.in_force["queued_runs"] == 3
    assert found.defaults["queued_runs"] == collections.quotas(state, "other").in_force["queued_runs"]
    with pytest.raises(NotFoundError):
        collections.set_quotas(state, "nope", {})


# runs


def test_a_collection_token_finds_its_own_runs_only(state):
    mine, theirs = run(state, "team"), run(state, "other")
    found, total = runs.find(state, TEAM)
    assert [r.trajectory_id for r in found] == [mine.trajectory_id] and total == 1
    found, total = runs.find(state, ADMIN)
    assert {r.trajectory_id for r in found} == {mine.trajectory_id, theirs.trajectory_id}
    with pytest.raises(ServiceError) as exc:
        runs.find(state, TEAM, collection="other")
    assert exc.value.status == 403


def test_a_time_without_a_zone_is_utc_and_a_label_names_a_key(state):
    old = run(state, "team", created=datetime(2026, 1, 1, 12, tzinfo=UTC))
    found, _ = runs.find(state, TEAM, since=datetime(2026, 1, 1, 11), until=datetime(2026, 1, 1, 13))
    assert [r.trajectory_id for r in found] == [old.trajectory_id]
    found, _ = runs.find(state, TEAM, since=datetime(2026, 1, 1, 12, 30))
    assert found == []
    with pytest.raises(Invalid) as exc:
        runs.find(state, TEAM, labels=["=x"])
    assert field(exc) == "label"


def test_another_collections_run_is_not_found(state):
    theirs = run(state, "other")
    with pytest.raises(NotFoundError, match="check the trajectory id"):
        runs.visible(state, TEAM, theirs.trajectory_id)
    assert runs.visible(state, ADMIN, theirs.trajectory_id).trajectory_id == theirs.trajectory_id
    with pytest.raises(NotFoundError, match="not found in team/t"):
        runs.get(state, "team", "t", theirs.trajectory_id)


def test_a_label_is_checked_and_authored_by_the_collection(state):
    record = run(state, "team")
    label, labels = runs.add_label(state, "team", "t", record.trajectory_id, "review", "good")
    assert (label.key, label.value, label.author) == ("review", "good", "team")
    assert [x.key for x in labels] == ["review"]
    with pytest.raises(ValidationError):
        runs.add_label(state, "team", "t", record.trajectory_id, " spaced ", "x")
    with pytest.raises(NotFoundError):
        runs.add_label(state, "other", "t", record.trajectory_id, "review", "x")


def test_cancelling_runs_cancels_none_when_one_is_missing(state):
    pending = run(state, "team", status=RunStatus.pending)
    with pytest.raises(NotFoundError):
        runs.cancel(state, "team", "t", [pending.trajectory_id, "0" * 32])
    assert state.store.get_run(pending.trajectory_id).status == RunStatus.pending
    with pytest.raises(Invalid):
        runs.cancel(state, "team", "t", ["bad\x00id"])


def test_a_workflow_log_is_read_in_pages(state):
    record = run(state, "team")
    for n in range(5):
        state.store.append_event(record.trajectory_id, f"line {n}")
    first = runs.log_of_workflow(state, TEAM, record.workflow_id, after=0, limit=3)
    assert [e.line for e in first.lines] == ["line 0", "line 1", "line 2"] and first.has_more
    rest = runs.log_of_workflow(state, TEAM, record.workflow_id, after=first.next_after, limit=3)
    assert [e.line for e in rest.lines] == ["line 3", "line 4"] and not rest.has_more
    empty = runs.log_of_workflow(state, TEAM, record.trajectory_id, after=rest.next_after, limit=3)
    assert empty.lines == [] and empty.next_after == rest.next_after
    with pytest.raises(NotFoundError, match="check the workflow id"):
        runs.log_of_workflow(state, Caller(collection="other"), record.workflow_id, after=0, limit=3)


def test_outputs_wait_for_the_end_of_the_run(state):
    record = run(state, "team", status=RunStatus.running)
    with pytest.raises(ServiceError) as exc:
        runs.outputs_zip(state, "team", "t", record.trajectory_id)
    assert exc.value.status == 409 and "is running" in exc.value.detail
    ended = run(state, "team")
    with pytest.raises(NotFoundError, match="no stored outputs"):
        runs.outputs_zip(state, "team", "t", ended.trajectory_id)


class Part:
    """A form's file part, as Starlette's UploadFile gives it."""

    def __init__(self, name: str, data: bytes):
        self.filename, self.size, self.file = name, len(data), io.BytesIO(data)


def test_a_run_is_refused_before_any_file_is_stored(state):
    with pytest.raises(ServiceError) as exc:
        runs.accept(state, "team", "t", {}, key=" ")
    assert exc.value.status == 422 and "Idempotency-Key" in exc.value.detail
    with pytest.raises(Invalid) as bad:
        runs.accept(state, "team", "t", {"init_params": {"x": "a\x00b"}})
    assert field(bad) == "init_params.x"
    with pytest.raises(NotFoundError):  # no such task: 404, and the files are never kept
        runs.accept(state, "team", "nope", {}, [Part("a.txt", b"hello")])
    assert list(state.storage.files("team")) == []


# tasks


def test_a_task_is_created_once_and_updated_in_part(state):
    stored = tasks.create(state, "team", "hello", RUNBOOK, "says hello")
    assert tasks.definition(stored).init_params["agent"] == "script"
    with pytest.raises(ServiceError) as exc:
        tasks.create(state, "team", "hello", RUNBOOK, None)
    assert exc.value.status == 409
    changed = tasks.put(state, "team", "hello", {"description": "says hello twice"})
    assert changed.description == "says hello twice" and changed.definition == stored.definition
    with pytest.raises(Invalid) as bad:
        tasks.put(state, "team", "hello", {"steps": "no"})
    assert field(bad).startswith("steps")


def test_a_task_summary_counts_the_ended_runs_it_rates(state):
    tasks.put(state, "team", "hello", RUNBOOK)
    now = datetime.now(UTC)
    run(state, "team", "hello", created=now - timedelta(minutes=3))
    run(state, "team", "hello", status=RunStatus.failed, created=now - timedelta(minutes=2))
    latest = run(state, "team", "hello", status=RunStatus.running, created=now - timedelta(minutes=1))
    (summary,) = tasks.summaries(state, TEAM)
    assert (summary.name, summary.agent, summary.ended, summary.rate) == ("hello", "script", 2, 0.5)
    assert summary.last is not None and summary.last.trajectory_id == latest.trajectory_id


def test_tasks_with_runs_come_first_then_stored_ones_without(state):
    tasks.put(state, "team", "zeta", RUNBOOK)
    tasks.put(state, "team", "idle", RUNBOOK)
    run(state, "team", "zeta")
    run(state, "team", "gone")  # its task was deleted: the runs remain
    found = tasks.with_runs(state, "team", limit=100)
    assert [(f.task, f.stored, len(f.runs)) for f in found] == [("gone", False, 1), ("zeta", True, 1),
                                                                ("idle", True, 0)]  # fmt: skip
    assert found[0].stats is not None and found[0].stats.total == 1 and found[2].stats is None


# audit, experiments, files


def test_the_audit_log_is_read_in_the_callers_scope():
    assert audit.scope(ADMIN, None) is None and audit.scope(ADMIN, "other") == "other"
    assert audit.scope(TEAM, None) == "team" and audit.scope(TEAM, "team") == "team"
    with pytest.raises(ServiceError) as exc:
        audit.scope(TEAM, "other")
    assert exc.value.status == 403


def test_an_unknown_experiment_is_not_found_either_way(state):
    with pytest.raises(NotFoundError, match="see the experiments list"):
        experiments.visible(state, TEAM, "nope")
    with pytest.raises(ServiceError) as exc:
        experiments.of_collection(state, "team", "nope")
    assert exc.value.status == 404 and "GET /api/v1/experiments/team" in exc.value.detail
    assert experiments.visible_list(state, TEAM) == []


def test_an_upload_goes_to_the_callers_collection(state):
    assert files.upload_collection(state, TEAM, None) == "team"
    assert files.upload_collection(state, ADMIN, "other") == "other"
    with pytest.raises(Invalid):
        files.upload_collection(state, ADMIN, None)
    with pytest.raises(NotFoundError):
        files.upload_collection(state, ADMIN, "nope")
    with pytest.raises(ServiceError):
        files.upload_collection(state, TEAM, "other")
    with pytest.raises(Invalid) as exc:
        files.upload(state, "team", [])
    assert field(exc) == "files"
    upload_id, paths = files.upload(state, "team", [Part("a.txt", b"hello")])
    assert paths and all(p.startswith("team/") for p in paths) and upload_id in paths[0]
    found = files.stored_file(state, TEAM, paths[0])
    assert found.size == 5 and found.name == "a.txt"
    with pytest.raises(NotFoundError):  # another collection's file is not there for this caller
        files.stored_file(state, Caller(collection="other"), paths[0])
