"""Scheduling an experiment on a real store, with a starter that stores each
run as the dispatcher would (pending, labelled) and a test that ends them:
interleaving, the concurrency cap, restarts between claim and accept,
infrastructure retries counted apart, cancel, resume and budgets."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from pier.db import Store
from pier.errors import InputError
from pier.experiments.service import EXPERIMENT_LABEL, Experiments
from pier.experiments.spec import parse_spec
from pier.record import Label, RunStatus, Trajectory, utcnow
from pier.tasks.model import Task

TASK = Task(init_params={"instruction": "do {{x}}", "agent": "script"})


class Starter:
    def __init__(self, store: Store):
        self.store = store
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.refuse: str | None = None
        self.down = False
        self.down_after: int | None = None  # refuse every start after this many

    def preflight(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any]) -> None:
        return None

    def start(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any],
              trajectory_id: str, labels: Sequence[Label]) -> None:  # fmt: skip
        if self.down or (self.down_after is not None and len(self.started) >= self.down_after):
            raise RuntimeError("the server refuses runs for now")
        if self.refuse:
            raise InputError(self.refuse)
        record = Trajectory.new(trajectory_id, collection, task_name, init_params=init_params)
        record.labels = list(labels)
        self.store.enqueue_run(record, {})
        self.started.append(trajectory_id)

    def cancel(self, trajectory_id: str) -> None:
        self.cancelled.append(trajectory_id)
        end(self.store, trajectory_id, status=RunStatus.cancelled)


def end(store: Store, trajectory_id: str, success: bool = True, status: RunStatus | None = None,
        stage: str | None = None, cost: float | None = None) -> None:  # fmt: skip
    record = store.get_run(trajectory_id)
    if stage is not None:
        record.fail(stage, f"{stage} broke")
    if cost is not None:
        record.outputs.usage = {"cost_usd": cost, "total_tokens": 100}
    final = status or (RunStatus.completed if success and stage is None else RunStatus.failed)
    record.finish(final, utcnow(), 1.0)
    store.save_run(record)


def service(store: Store, starter: Starter, **kw: Any) -> Experiments:
    return Experiments(store, starter, max_runs=10_000, lease_sec=30, owner=kw.pop("owner", "me"), **kw)


def create(experiments: Experiments, **fields: Any):
    definition = parse_spec({"name": "e", "task": "t", "matrix": {"vars": [{"x": 1}, {"x": 2}, {"x": 3}]},
                             "attempts": 4, "concurrency": 3, **fields})  # fmt: skip
    return experiments.create("c", definition, TASK, "t")


def open_runs(store: Store, experiment_id: str) -> list[str]:
    runs, _ = store.list_runs(labels=[(EXPERIMENT_LABEL, experiment_id)], statuses=["pending"], limit=1000)
    return [r.trajectory_id for r in runs]


def drain(store: Store, experiments: Experiments, experiment_id: str, outcome=lambda tid, i: True) -> int:
    passes = 0
    while experiments.get(experiment_id).stored.status == "running":
        experiments.step(experiments.get(experiment_id))
        for i, tid in enumerate(open_runs(store, experiment_id)):
            end(store, tid, success=outcome(tid, i))
        passes += 1
        assert passes < 200
    return passes


def test_cells_interleave_and_the_cap_holds(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments)
    experiments.step(experiment)
    assert len(starter.started) == 3  # concurrency 3
    cells = [a.cell for a in store.attempts(experiment.id)]
    assert cells == [0, 1, 2]  # attempt 0 of every cell first
    experiments.step(experiment)
    assert len(starter.started) == 3  # nothing ended: nothing more starts
    for tid in starter.started[:2]:
        end(store, tid)
    experiments.step(experiment)
    assert len(starter.started) == 5
    assert [(a.cell, a.attempt) for a in store.attempts(experiment.id)][3:] == [(0, 1), (1, 1)]


def test_every_attempt_runs_exactly_once_and_the_experiment_completes(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments)
    drain(store, experiments, experiment.id, outcome=lambda tid, i: i % 2 == 0)
    assert experiments.get(experiment.id).stored.status == "completed"
    assert len(starter.started) == len(set(starter.started)) == 12
    found = experiments.results(experiments.get(experiment.id))
    assert found["total"]["attempts"] == 12
    assert sum(c["attempts"] for c in found["cells"]) == 12
    assert all(c["attempts"] == 4 for c in found["cells"])


def test_a_server_that_died_between_claim_and_accept_starts_that_same_run(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments, concurrency=2)
    claimed = store.claim_attempt(experiment.id, 0, 0, 0, 0, "a" * 32)  # then the process died
    assert claimed is not None
    later = service(store, starter, owner="next")
    store.update_experiment(experiment.id, lease_owner="me", lease_until=utcnow() - timedelta(seconds=1))
    later.step(later.get(experiment.id))
    assert starter.started[0] == "a" * 32  # the claimed id, not a new one
    assert len(starter.started) == 2
    end(store, "a" * 32)
    later.step(later.get(experiment.id))
    assert starter.started.count("a" * 32) == 1


def test_a_lease_held_by_another_server_is_respected(store: Store) -> None:
    starter = Starter(store)
    first, second = service(store, starter, owner="one"), service(store, starter, owner="two")
    experiment = create(first)
    first.step(experiment)
    second.step(second.get(experiment.id))
    assert len(starter.started) == 3


def test_infrastructure_failures_are_retried_and_counted_apart(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments, attempts=1, concurrency=3, infra_retries=1)
    experiments.step(experiment)
    first = list(starter.started)
    end(store, first[0], stage="create")  # the sandbox could not be made
    end(store, first[1], success=False)  # the agent failed
    end(store, first[2])
    experiments.step(experiments.get(experiment.id))
    assert len(starter.started) == 4  # one retry, of the infrastructure failure only
    retry = starter.started[3]
    assert store.get_run(retry).labels[-1].key == "pier.retry"
    end(store, retry, stage="setup")  # fails again: the retries are used up
    experiments.step(experiments.get(experiment.id))
    assert experiments.get(experiment.id).stored.status == "completed"
    total = experiments.results(experiments.get(experiment.id))["total"]
    assert (total["attempts"], total["successes"], total["infra_failures"], total["infra_lost"]) == (
        2,
        1,
        2,
        1,
    )
    assert total["failures"] == [
        {"outcome": "checks_failed", "stage": "check", "message": "checks failed", "count": 1}
    ]
    assert total["outcomes"] == {"success": 1, "checks_failed": 1}


NOTHING = "the agent finished with nothing in /app/results: results are the run's contract"


@pytest.mark.parametrize("recorded", ["no_results", None], ids=["outcome", "older-record"])
def test_an_agent_that_writes_nothing_is_a_failed_attempt_not_infrastructure(store: Store, recorded) -> None:
    """A good input (writes a result) and a bad one (writes nothing), 3 attempts
    each: 50 %, the bad cell's 3 attempts failures, none retried, 0 infra. On
    main the bad cell read `ended 0, infra 9` and the experiment 100 %. Records
    written before runs kept an outcome are judged the same way."""
    starter = Starter(store)
    experiments = service(store, starter)
    definition = parse_spec({"name": "e", "task": "t", "matrix": {"vars": [{"x": "good"}, {"x": "bad"}]},
                             "attempts": 3, "concurrency": 6, "infra_retries": 2})  # fmt: skip
    experiment = experiments.create("c", definition, TASK, "t")
    for _ in range(10):
        experiments.step(experiments.get(experiment.id))
        for tid in open_runs(store, experiment.id):
            record = store.get_run(tid)
            if record.init_params["vars"]["x"] == "bad":
                record.fail("collect", NOTHING, recorded)
            record.finish(RunStatus.failed if record.error else RunStatus.completed, utcnow(), 1.0)
            store.save_run(record)
    assert experiments.get(experiment.id).stored.status == "completed"
    assert len(starter.started) == 6  # nothing retried
    found = experiments.results(experiments.get(experiment.id))
    total = found["total"]
    assert (total["attempts"], total["successes"], total["pass_rate"]) == (6, 3, 0.5)
    assert (total["infra_failures"], total["infra_lost"]) == (0, 0)
    bad = next(c for c in found["cells"] if c["axes"]["row"] == "1")
    assert (bad["attempts"], bad["successes"], bad["infra_failures"]) == (3, 0, 0)
    assert bad["outcomes"] == {"no_results": 3}
    assert bad["failures"] == [{"outcome": "no_results", "stage": "collect", "message": NOTHING, "count": 3}]


def test_cancel_stops_scheduling_and_cancels_runs_in_flight_then_resume_goes_on(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments)
    experiments.step(experiment)
    end(store, starter.started[0])
    experiments.cancel(experiments.get(experiment.id))
    assert sorted(starter.cancelled) == sorted(starter.started[1:])
    experiments.step(experiments.get(experiment.id))  # a pass over a cancelled experiment starts nothing
    assert len(starter.started) == 3
    with pytest.raises(InputError):
        experiments.cancel(experiments.get(experiment.id))
    experiments.resume(experiments.get(experiment.id))
    drain(store, experiments, experiment.id)
    found = experiments.results(experiments.get(experiment.id))
    assert found["total"]["cancelled"] == 2
    # the finished attempt was not run again; the cancelled two stay cancelled
    assert found["attempts_started"] == 12 and len(starter.started) == 12


def test_a_cost_budget_stops_new_runs(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments, budget={"cost_usd": 0.25})
    experiments.step(experiment)
    for tid in starter.started:
        end(store, tid, cost=0.1)
    experiments.step(experiments.get(experiment.id))
    stored = experiments.get(experiment.id).stored
    assert stored.status == "stopped" and "cost budget reached" in (stored.reason or "")
    assert len(starter.started) == 3


def test_a_run_refused_at_start_fails_its_attempt_saying_why(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments, attempts=1)
    starter.refuse = "the secret API_KEY is not set: set it in the collection"
    experiments.step(experiment)
    tries = experiments.runs(experiments.get(experiment.id))
    assert len(tries) == 3
    for _attempt, record in tries:
        assert record is not None and record.status == RunStatus.failed
        assert "API_KEY" in (record.error or "")
        assert any(label.key == EXPERIMENT_LABEL for label in record.labels)


def test_a_server_that_refuses_for_now_is_tried_again_later(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments)
    starter.down = True
    experiments.step(experiment)
    assert starter.started == []
    starter.down = False
    experiments.step(experiments.get(experiment.id))
    assert len(starter.started) == 3 and len(store.attempts(experiment.id)) == 3


def test_an_attempt_claimed_but_not_yet_accepted_keeps_the_experiment_open(store: Store) -> None:
    starter = Starter(store)
    experiments = service(store, starter)
    experiment = create(experiments, attempts=1)
    starter.down_after = 2  # the third start is refused for now
    experiments.step(experiment)  # seq 0 and 1 start; seq 2 is claimed, its start refused
    for tid in list(starter.started):
        end(store, tid)
    experiments.step(experiments.get(experiment.id))  # still refused: the experiment must stay open
    assert experiments.get(experiment.id).stored.status == "running"
    starter.down_after = None
    experiments.step(experiments.get(experiment.id))
    assert len(starter.started) == 3
    end(store, starter.started[2])
    experiments.step(experiments.get(experiment.id))
    assert experiments.get(experiment.id).stored.status == "completed"
