"""Experiments: create (checked whole before anything runs), read, cancel,
resume, and `step`, one scheduling pass that the server's poller (and
`pier experiment run`) calls for each running experiment.

Each attempt is an ordinary run: accepted through the same path as any API run
(the `Starter` the caller hands in: the API's dispatcher), so it goes through
the same executor (in-process, or the Temporal fleet), shows in `pier runs`,
and carries the labels `pier.experiment`, `pier.cell` and `pier.attempt`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pier.db import Store, StoredAttempt, StoredExperiment
from pier.errors import InputError, NotFoundError
from pier.experiments.check import check
from pier.experiments.results import INFRA, outcome, results, tokens
from pier.experiments.results import cost as run_cost
from pier.experiments.spec import Cell, ExperimentError, ExperimentSpec, run_count
from pier.lifecycle.outcomes import Outcome, failed_to_start
from pier.names import check_name
from pier.record import Label, Trajectory, utcnow
from pier.runbook.parse import parse
from pier.tasks.build import task_from_runbook
from pier.tasks.model import Task

log = logging.getLogger(__name__)

EXPERIMENT_LABEL, CELL_LABEL, ATTEMPT_LABEL, RETRY_LABEL = (
    "pier.experiment", "pier.cell", "pier.attempt", "pier.retry",
)  # fmt: skip
RUNNING, COMPLETED, CANCELLED, STOPPED = "running", "completed", "cancelled", "stopped"
STATUSES = (RUNNING, COMPLETED, CANCELLED, STOPPED)
OPEN = ("claimed", "started")
Clock = Callable[[], datetime]


class Starter(Protocol):
    """How an experiment's runs start and stop: the API's dispatcher."""

    def preflight(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any]) -> None:
        """InputError when a run with these init_params would be refused."""

    def start(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any],
              trajectory_id: str, labels: Sequence[Label]) -> None:  # fmt: skip
        """Accept the run with this trajectory id; InputError when it is refused."""

    def cancel(self, trajectory_id: str) -> None: ...


@dataclass(frozen=True)
class Experiment:
    """A stored experiment with its definition and cells read back."""

    stored: StoredExperiment
    spec: ExperimentSpec
    cells: list[Cell]
    task: Task

    @property
    def id(self) -> str:
        return self.stored.id

    @property
    def total_runs(self) -> int:
        return len(self.cells) * self.spec.attempts

    def cell_of(self, seq: int) -> tuple[Cell, int]:
        """Attempt-major: seq 0..n-1 are attempt 0 of every cell, and so on."""
        return self.cells[seq % len(self.cells)], seq // len(self.cells)

    @classmethod
    def of(cls, stored: StoredExperiment) -> Experiment:
        return cls(
            stored,
            ExperimentSpec.model_validate(stored.definition),
            [Cell.model_validate(c) for c in stored.cells["cells"]],
            Task.model_validate(stored.task_definition),
        )


def task_of(
    store: Store, collection: str, spec: ExperimentSpec, default_snapshot: str | None
) -> tuple[Task, str]:
    """The task an experiment runs and its name: a stored task's, or its runbook's
    (whose runs take the experiment's name as their task's)."""
    if (spec.task is None) == (spec.runbook is None):
        raise ExperimentError("task", "give either task (a stored task's name) or runbook (its text)")
    if spec.task is not None:
        try:
            return Task.model_validate(store.get_task(collection, spec.task).definition), spec.task
        except NotFoundError:
            raise ExperimentError(
                "task", f"{spec.task!r} is not a task of collection {collection!r}: push it first"
            ) from None
    try:
        runbook = parse(spec.runbook or "", path="runbook")
    except InputError as exc:
        raise ExperimentError("runbook", str(exc)) from None
    return task_from_runbook(runbook, default_snapshot), spec.name


class Experiments:
    def __init__(self, store: Store, starter: Starter, *, max_runs: int, lease_sec: float,
                 owner: str, clock: Clock = utcnow):  # fmt: skip
        self.store = store
        self.starter = starter
        self.max_runs = max_runs
        self.lease = timedelta(seconds=lease_sec)
        self.owner = owner
        self.clock = clock

    # creating and reading

    def create(self, collection: str, spec: ExperimentSpec, task: Task, task_name: str) -> Experiment:
        """Check the whole matrix (ExperimentError naming the field and the runs it
        would start), then store it running: the next poll starts its first runs."""
        try:
            check_name("task", task_name)
        except InputError as exc:
            raise ExperimentError("name", f"{exc} (a runbook experiment's runs take its name as their task's)",
                                  run_count(spec)) from None  # fmt: skip
        found = check(
            spec, task, lambda p: self.starter.preflight(collection, task_name, task, p), self.max_runs
        )
        stored = self.store.create_experiment(
            id=uuid.uuid4().hex, collection=collection, name=spec.name, task=task_name,
            definition=spec.model_dump(mode="json"), task_definition=task.model_dump(mode="json"),
            cells={"cells": [c.model_dump(mode="json") for c in found]}, status=RUNNING,
            reason=None, lease_owner=None, lease_until=None, ended_at=None,
        )  # fmt: skip
        return Experiment.of(stored)

    def get(self, experiment_id: str) -> Experiment:
        return Experiment.of(self.store.get_experiment(experiment_id))

    def results(self, experiment: Experiment) -> dict[str, Any]:
        attempts = self.store.attempts(experiment.id)
        records = self.store.runs_by_id(a.trajectory_id for a in attempts)
        found = results(experiment.cells, attempts, records, experiment.spec.attempts)
        started = len({a.seq for a in attempts})
        return {"runs_total": experiment.total_runs, "attempts_started": started,
                "runs_started": len(attempts), **found}  # fmt: skip

    def runs(self, experiment: Experiment) -> list[tuple[StoredAttempt, Trajectory | None]]:
        """Every try, with its run (None while it is only claimed)."""
        attempts = self.store.attempts(experiment.id)
        records = self.store.runs_by_id(a.trajectory_id for a in attempts)
        return [(a, records.get(a.trajectory_id)) for a in attempts]

    # cancelling and resuming

    def cancel(self, experiment: Experiment) -> Experiment:
        """Start nothing more and cancel the runs in flight."""
        if not self.store.set_experiment_status(experiment.id, (RUNNING, STOPPED), status=CANCELLED,
                                                reason="cancelled", ended_at=self.clock()):  # fmt: skip
            raise InputError(f"experiment {experiment.id} is {experiment.stored.status}: only a running "
                             "or stopped one can be cancelled")  # fmt: skip
        self._cancel_open(experiment)
        return self.get(experiment.id)

    def resume(self, experiment: Experiment) -> Experiment:
        """Go on where it stopped (cancelled, or stopped by its budget): finished
        attempts are never run again."""
        if not self.store.set_experiment_status(experiment.id, (CANCELLED, STOPPED), status=RUNNING,
                                                reason=None, ended_at=None):  # fmt: skip
            raise InputError(f"experiment {experiment.id} is {experiment.stored.status}: only a cancelled "
                             "or stopped one can be resumed")  # fmt: skip
        return self.get(experiment.id)

    def _cancel_open(self, experiment: Experiment) -> None:
        open_tries = self.store.attempts(experiment.id, OPEN)
        records = self.store.runs_by_id(a.trajectory_id for a in open_tries)
        for attempt in open_tries:
            record = records.get(attempt.trajectory_id)
            if record is None or record.status.terminal:
                continue
            try:
                self.starter.cancel(attempt.trajectory_id)
            except Exception:  # one run that cannot be cancelled must not keep the others running
                log.exception("experiment %s: could not cancel run %s", experiment.id, attempt.trajectory_id)

    # scheduling

    def step(self, experiment: Experiment) -> None:
        """One pass: note ended runs (retrying infrastructure failures), stop at
        the budget, start attempts up to the concurrency cap, finish when all ended."""
        if experiment.stored.status != RUNNING:
            return
        now = self.clock()
        if not self.store.take_lease(experiment.id, self.owner, now + self.lease, now):
            return  # another server works it
        in_flight = self._settle(experiment)
        spec = experiment.spec
        reason = self._over_budget(experiment, now)
        if reason is not None:
            self.store.set_experiment_status(experiment.id, (RUNNING,), status=STOPPED, reason=reason,
                                             ended_at=now)  # fmt: skip
            return
        seq = self.store.next_seq(experiment.id)
        while in_flight < spec.concurrency and seq < experiment.total_runs:
            cell, attempt = experiment.cell_of(seq)
            claimed = self.store.claim_attempt(experiment.id, seq, cell.index, attempt, 0, uuid.uuid4().hex)
            if claimed is not None and not self._start(experiment, claimed):
                return  # the server refuses runs for now (a quota): the next pass tries again
            in_flight += 1
            seq += 1
        if in_flight == 0 and seq >= experiment.total_runs:
            self.store.set_experiment_status(experiment.id, (RUNNING,), status=COMPLETED, ended_at=now)
            self.store.release_lease(experiment.id, self.owner)
        if self.store.get_experiment(experiment.id).status == CANCELLED:  # cancelled meanwhile
            self._cancel_open(experiment)

    def _settle(self, experiment: Experiment) -> int:
        """Mark the open tries whose runs ended; start claimed ones the server
        has not accepted yet (it stopped in between); retry infrastructure
        failures. How many are in flight after it."""
        open_tries = self.store.attempts(experiment.id, OPEN)
        records = self.store.runs_by_id(a.trajectory_id for a in open_tries)
        in_flight = 0
        for attempt in open_tries:
            record = records.get(attempt.trajectory_id)
            if record is None:  # claimed, not accepted (a restart, or the server refused for now)
                self._start(experiment, attempt)
                in_flight += 1  # pending either way: the experiment is not done while it is
            elif (found := outcome(record)) is None:
                in_flight += 1
                if attempt.state == "claimed":
                    self.store.mark_attempt(attempt.id, "started")
            else:
                self.store.mark_attempt(attempt.id, "done", found)
                if found == INFRA and attempt.retry < experiment.spec.infra_retries:
                    retry = self.store.claim_attempt(experiment.id, attempt.seq, attempt.cell,
                                                     attempt.attempt, attempt.retry + 1, uuid.uuid4().hex)  # fmt: skip
                    if retry is not None:
                        self._start(experiment, retry)
                        in_flight += 1
        return in_flight

    def _start(self, experiment: Experiment, attempt: StoredAttempt) -> bool:
        """Accept the try's run; True when it is in flight (or was refused and
        stored failed, so it ends the attempt), False when the server could not
        take it now."""
        cell = experiment.cells[attempt.cell]
        labels = [
            Label(key=EXPERIMENT_LABEL, value=experiment.id),
            Label(key=CELL_LABEL, value=cell.key),
            Label(key=ATTEMPT_LABEL, value=str(attempt.attempt)),
        ] + ([Label(key=RETRY_LABEL, value=str(attempt.retry))] if attempt.retry else [])
        stored = experiment.stored
        try:
            self.starter.start(stored.collection, stored.task, experiment.task, dict(cell.init_params),
                               attempt.trajectory_id, labels)  # fmt: skip
        except InputError as exc:  # refused now (a secret removed since): the attempt fails, saying why
            self._refused(experiment, attempt, labels, str(exc))
            return True
        except Exception:
            log.exception("experiment %s: could not start attempt %s of cell %s", experiment.id,
                          attempt.attempt, cell.key)  # fmt: skip
            return False
        self.store.mark_attempt(attempt.id, "started")
        return True

    def _refused(
        self, experiment: Experiment, attempt: StoredAttempt, labels: list[Label], message: str
    ) -> None:
        stored = experiment.stored
        record = Trajectory.new(attempt.trajectory_id, stored.collection, stored.task,
                                init_params=dict(experiment.cells[attempt.cell].init_params))  # fmt: skip
        try:
            self.store.create_run(
                failed_to_start(record, f"the experiment's run could not start: {message}", Outcome.invalid)
            )
            self.store.add_labels(attempt.trajectory_id, labels)
        except InputError:  # it exists: it was accepted after all
            pass
        self.store.mark_attempt(attempt.id, "started")

    def _over_budget(self, experiment: Experiment, now: datetime) -> str | None:
        budget = experiment.spec.budget
        elapsed = (now - experiment.stored.started_at).total_seconds()
        if budget.wall_time_sec is not None and elapsed >= budget.wall_time_sec:
            return f"wall time budget reached ({budget.wall_time_sec:g} s)"
        if budget.cost_usd is None and budget.tokens is None:
            return None
        attempts = self.store.attempts(experiment.id)
        records = self.store.runs_by_id(a.trajectory_id for a in attempts).values()
        spent = sum(c for r in records if (c := run_cost(r)) is not None)
        used = sum(tokens(r) for r in records)
        if budget.cost_usd is not None and spent >= budget.cost_usd:
            return f"cost budget reached (${spent:.4f} of ${budget.cost_usd:g})"
        if budget.tokens is not None and used >= budget.tokens:
            return f"token budget reached ({used} of {budget.tokens})"
        return None

    def poll(self) -> int:
        """A pass over every running experiment; how many there were."""
        running = self.store.experiments_with_status((RUNNING,))
        for stored in running:
            try:
                self.step(Experiment.of(stored))
            except Exception:  # one experiment's failure must not stop the others
                log.exception("experiment %s: scheduling pass failed", stored.id)
        return len(running)
