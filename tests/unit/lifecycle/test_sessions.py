"""Keep and continue, below the engine: the plan's checks of keep_sandbox and
continue_from, what the sweep judges a kept sandbox by, and `pier run`'s options."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pier.db import Store
from pier.errors import InputError
from pier.lifecycle.plan import plan_run
from pier.lifecycle.sessions import sweep_status
from pier.record import RunStatus, Trajectory
from pier.runbook import parse
from pier.sandbox.base import LABEL_CREATED, LABEL_DEADLINE, LABEL_OWNER, LABEL_RUN, SandboxInfo
from pier.sandbox.sweeper import KEPT, sweep_reason
from pier.settings import Settings
from pier.tasks import task_from_runbook

RUNBOOK = "---\nagent: script\n---\n# t\n\n```bash\ntrue\n```\n"
NOW = 1_800_000_000.0


def plan(tmp_path: Path, **params):
    from pier.lifecycle.plan import RunInputs

    inputs = RunInputs(trajectory_id="a" * 32, collection="c", task="t")
    settings = Settings(home=tmp_path / "home", ca_bundle=None)
    return plan_run(task_from_runbook(parse(RUNBOOK)), params, inputs, settings)[1]


def test_keep_and_continue_reach_the_plan(tmp_path):
    parent = uuid.uuid4().hex
    made = plan(tmp_path, keep_sandbox=True, continue_from=f"c-t--{parent}")
    assert made.keep_sandbox is True and made.continue_from == parent
    assert plan(tmp_path).keep_sandbox is False and plan(tmp_path).continue_from is None


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"keep_sandbox": "yes"}, "keep_sandbox must be true or false"),
        ({"continue_from": "../etc"}, "continue_from must be the trajectory id"),
        ({"continue_from": 7}, "continue_from must be the trajectory id"),
        (
            {"continue_from": "b" * 32, "network": {"allow": ["pypi.org"]}},
            "network allow-list is not supported",
        ),
    ],
)
def test_bad_keep_or_continue_is_refused_before_any_sandbox(tmp_path, params, says):
    with pytest.raises(InputError, match=says):
        plan(tmp_path, **params)


@pytest.fixture
def store(tmp_path) -> Store:
    with Store.open(f"sqlite:///{tmp_path / 'pier.db'}") as opened:
        yield opened


def stored(store: Store, status: RunStatus, **sandbox) -> Trajectory:
    record = Trajectory.new(uuid.uuid4().hex, "c", "t")
    record.status = status
    for key, value in sandbox.items():
        setattr(record.outputs.sandbox, key, value)
    store.create_run(record)
    return record


def test_the_sweep_keeps_a_kept_sandbox_until_it_expires(store):
    kept = stored(store, RunStatus.completed, id="x", kept_until=NOW + 10)
    assert sweep_status(store, kept.trajectory_id, now=NOW) == KEPT
    assert sweep_status(store, kept.trajectory_id, now=NOW + 11) == "completed"
    plain = stored(store, RunStatus.completed, id="y")
    assert sweep_status(store, plain.trajectory_id, now=NOW) == "completed"
    assert sweep_status(store, uuid.uuid4().hex, now=NOW) is None


def test_the_sweep_follows_the_runs_that_continued_in_a_sandbox(store):
    last = stored(store, RunStatus.running)
    first = stored(store, RunStatus.completed, id="x", continued_by=last.trajectory_id)
    assert sweep_status(store, first.trajectory_id, now=NOW) == KEPT, "in use by a continuing run"
    last.status = RunStatus.failed
    store.save_run(last, replace_final=True)
    assert sweep_status(store, first.trajectory_id, now=NOW) == "failed"
    last.outputs.sandbox.kept_until = NOW + 5
    store.save_run(last, replace_final=True)
    assert sweep_status(store, first.trajectory_id, now=NOW) == KEPT


def test_a_kept_sandbox_is_not_swept_for_its_first_runs_deadline_or_owner():
    labels = {LABEL_RUN: "r", LABEL_CREATED: str(int(NOW - 9000)), LABEL_DEADLINE: str(int(NOW - 8000)),
              LABEL_OWNER: "elsewhere:1:1"}  # fmt: skip
    old = SandboxInfo(id="c" * 64, labels=labels, running=True)
    assert sweep_reason(old, KEPT, NOW, 300) is None
    assert sweep_reason(old, "completed", NOW, 300) == "its run is completed"


def test_pier_run_passes_keep_and_continue_from(tmp_path):
    from pier.cli.run import build_request

    book = tmp_path / "RUNBOOK.md"
    book.write_text(RUNBOOK)
    parent = uuid.uuid4().hex
    request = build_request(book, [], [], None, None, None, None, None, None, False, "local",
                            session=(True, parent))  # fmt: skip
    assert request.run_params["keep_sandbox"] is True and request.run_params["continue_from"] == parent
    plain = build_request(book, [], [], None, None, None, None, None, None, False, "local")
    assert "keep_sandbox" not in plain.run_params and "continue_from" not in plain.run_params


def test_kept_sandboxes_hold_the_collections_concurrent_runs(store, tmp_path):
    import time

    from pier.policies.quotas import CollectionQuotas, QuotaExceeded

    settings = Settings(home=tmp_path / "home", ca_bundle=None, quota_concurrent_runs=2)
    from pier.storage.local import LocalStorage

    quotas = CollectionQuotas(store, lambda: LocalStorage(tmp_path / "storage"), settings)
    quotas.check_new_run("c")
    stored(store, RunStatus.completed, id="x", kept_until=time.time() + 100)
    stored(store, RunStatus.completed, id="y", kept_until=time.time() - 1)  # expired
    stored(store, RunStatus.completed, id="z", kept_until=time.time() + 100, continued_by="a" * 32)
    quotas.check_new_run("c")  # one kept: a slot is left
    stored(store, RunStatus.failed, id="w", kept_until=time.time() + 50)
    with pytest.raises(QuotaExceeded, match="keeps 2 sandbox") as refused:
        quotas.check_new_run("c")
    assert refused.value.quota == "concurrent_runs" and 1 <= refused.value.retry_after <= 51
    quotas.check_new_run("c", continuing=True)  # a run that continues in one takes its place
    quotas.check_new_run("other")  # another collection's kept sandboxes are not this one's
