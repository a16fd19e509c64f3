"""What a starting server does about the runs a previous one left: nothing
accepted is lost, and nothing a live process runs is touched.

- running, and its owner (the process that ran it) is gone: a runbook run's
  sandbox with the agent's work in it cannot be resumed, so the run fails
  saying so (and is swept). A workflow run the API accepted (a top-level one,
  its request kept) is taken over from its record instead: it is queued again
  as pending, and runs on from it (pier.lifecycle.workflow keeps the steps
  that completed and the fan-out children that ended); the children that had
  not ended died with the process, and end failed saying their item starts
  again, which their parent's fan-out then does (it is no longer told of them).
  A run whose owner still runs (a `pier run` on the same PIER_HOME, a zombie
  aside) is left to it;
- pending: it never started, so it starts now, in the order it was accepted
  (a pending run with an owner is a `pier run`'s, not the server's to start);
- ended but with a kept request: the server stopped before finishing up, so
  its webhook is sent now.

An owner on another host cannot be judged from here: such a running run (or
one with no owner, from an older pier) is taken for the previous server's, so
one server per store still holds.
With a durable executor (Temporal) a run's owner is its workflow, not a
server: a replica leaves runs whose workflow is open alone, and reconciles the
rest, at start and every PIER_RECONCILE_INTERVAL_SEC after:

- pending with no workflow (Temporal did not answer when it was submitted, or
  the server died between storing and submitting it): submitted again, by
  trajectory id, so two replicas doing it at once start one workflow;
- not ended, but its workflow has (the database was down when the run ended,
  past its retry budget): ended now, saying how the workflow ended and why.

Recovery never holds up the server's start: it runs in the background once
the executor has started, tried again with a growing wait until it succeeds
(a database or Temporal that does not answer yet only delays it).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from pier.errors import NotFoundError
from pier.executors.base import Holding, Job
from pier.lifecycle.background import sweep_once
from pier.lifecycle.orphans import UNFINISHED, end_orphan, end_orphaned_runs
from pier.lifecycle.outcomes import CANCELLED, end_record, failed_to_start
from pier.lifecycle.workflow import lost_child
from pier.record import ActivityOutputs, RunStatus, StageStatus, Trajectory, utcnow
from pier.sandbox.owner import owner_alive
from pier.server.dispatcher import Dispatcher, Payload

log = logging.getLogger(__name__)

LOST_REQUEST = "the server lost this run's request before it started; run it again"
TAKEN_OVER = (
    "the server running this workflow stopped before it ended; this one takes it over from its record "
    "(the steps that completed are kept)"
)
FIRST_RETRY_SEC = 1.0


class Recovery:
    """recover() in a thread of its own, after the executor started: tried
    again with a doubling wait until it succeeds; then, for a durable
    executor, reconcile() every PIER_RECONCILE_INTERVAL_SEC."""

    def __init__(self, dispatcher: Dispatcher):
        self._dispatcher = dispatcher
        self._since = utcnow()  # runs accepted from now on are this server's own
        self._interval = dispatcher.services.settings.reconcile_interval_sec
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pier-recovery", daemon=True)
        self.recovered = threading.Event()  # the first pass succeeded

    def start(self) -> Recovery:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        wait = FIRST_RETRY_SEC
        while not self._stop.is_set():
            try:
                if not self.recovered.is_set():
                    recover(self._dispatcher, self._since)
                    self.recovered.set()
                    log.info("recovery done")
                elif self._dispatcher.executor.durable:
                    reconcile(self._dispatcher)
                if not self._dispatcher.executor.durable:
                    return
                wait = self._interval
            except Exception as exc:  # the database or Temporal does not answer yet
                log.warning("recovery failed (%s: %s); trying again in %.0fs", type(exc).__name__, exc, wait)
                wait = min(wait * 2, self._interval)
            self._stop.wait(wait)


def recover(dispatcher: Dispatcher, before: datetime | None = None) -> None:
    """What a start does about the runs accepted `before` it (by a previous
    server): see the module's docstring."""
    if dispatcher.executor.durable:
        reconcile(dispatcher)
        return
    services = dispatcher.services
    take_over_workflows(dispatcher, before)
    for record in end_orphaned_runs(services.store, services.settings, judge=abandoned_at_start):
        log.warning("run %s was running when its process stopped: marked failed", record.trajectory_id)
    sweep_once(lambda: services.backend, services.store, services.settings)
    requeue_pending(dispatcher, before)
    finish_ended(dispatcher, before)


def reconcile(dispatcher: Dispatcher) -> None:
    """Give every unended run its owner back (see the module's docstring).
    Runs younger than the time a submit may take are left to their accept."""
    settings = dispatcher.services.settings
    settled = utcnow() - timedelta(seconds=settings.submit_timeout_sec + 5)
    resubmitted = ended = 0
    for record in dispatcher.store.runs_with_status([RunStatus.pending, RunStatus.running]):
        if record.created > settled:
            continue
        held = dispatcher.executor.holding(record.trajectory_id)
        if held is not None and held.open:
            continue
        if held is None and record.status == RunStatus.pending:
            resubmitted += _resubmit(dispatcher, record)
        else:
            _end_unrecorded(dispatcher, record, held)
            ended += 1
    if resubmitted or ended:
        log.warning("reconciled: %d run(s) submitted again, %d ended that had no end", resubmitted, ended)


def _resubmit(dispatcher: Dispatcher, record: Trajectory) -> int:
    request = dispatcher.store.run_request(record.trajectory_id)
    if request is None:
        dispatcher.store.save_run(failed_to_start(record, LOST_REQUEST))
        return 0
    _submit(dispatcher, record.trajectory_id, request)
    log.info("run %s had no workflow: submitted again", record.trajectory_id)
    return 1


def unrecorded_end(held: Holding | None) -> tuple[RunStatus, str]:
    """How a run whose workflow ended (or vanished) without saying so ends."""
    if held is None:
        return (
            RunStatus.failed,
            "the run's workflow is gone from Temporal and its end was never recorded; run it again",
        )
    if held.ended_as == "canceled":
        return RunStatus.cancelled, CANCELLED
    why = f": {held.reason}" if held.reason else ""
    return RunStatus.failed, (
        f"the run's workflow ended ({held.ended_as}{why}) without recording the run's end "
        "(the database did not answer, or the worker failed): ended by a server's reconciliation; run it again"
    )


def _end_unrecorded(dispatcher: Dispatcher, record: Trajectory, held: Holding | None) -> None:
    status, message = unrecorded_end(held)
    store = dispatcher.store
    if store.save_run(end_record(record, status, message)):
        store.append_event(record.trajectory_id, message, record.failed_stage or "save")
        dispatcher.finished(record.trajectory_id, None, record)


def abandoned_at_start(record: Trajectory) -> bool:
    """Whether a starting server ends this unfinished run: its owner is gone, or
    it is running and its owner cannot be judged (see the module's docstring)."""
    alive = owner_alive(record.owner) if record.owner else None
    if record.status == RunStatus.running:
        return alive is not True
    return alive is False


def take_over_workflows(dispatcher: Dispatcher, before: datetime | None = None) -> list[str]:
    """Queue again (pending, no owner: requeue_pending starts it) every
    workflow run a previous server was running when it stopped, ending first
    the children it had under way (and theirs), which died with it, and taking
    them out of its fan-out's record, so that it starts their items again. The
    ids taken over. A `pier run`'s workflow (no kept request) and a child
    workflow (its parent's fan-out starts its item again) are not taken over."""
    store, settings = dispatcher.store, dispatcher.services.settings
    unfinished = store.runs_with_status(UNFINISHED)
    children: dict[str, list[Trajectory]] = {}
    for record in unfinished:
        if record.parent_trajectory_id:
            children.setdefault(record.parent_trajectory_id, []).append(record)
    taken = []
    for record in unfinished:
        tid = record.trajectory_id
        if (
            record.status != RunStatus.running
            or record.parent_trajectory_id is not None
            or not record.is_workflow
            or not abandoned_at_start(record)
            or (before is not None and record.created >= before)
            or store.run_request(tid) is None
        ):
            continue
        lost: set[str] = set()
        below = list(children.get(tid, []))
        while below:
            child = below.pop()
            end_orphan(store, settings, child, lost_child("server", child.parent_trajectory_id or tid))
            lost.add(child.trajectory_id)
            below.extend(children.get(child.trajectory_id, []))
        _forget_children(record, lost)
        record.status, record.owner = RunStatus.pending, None
        if store.save_run(record):
            store.append_event(tid, TAKEN_OVER, "prepare")
            log.warning("workflow run %s was running when its server stopped: taken over from its record "
                        "(%d child run(s) lost)", tid, len(lost))  # fmt: skip
            taken.append(tid)
    return taken


def _forget_children(record: Trajectory, lost: set[str]) -> None:
    """Take the lost children out of the fan-outs under way in the record (the
    `started` a list_emit_await keeps), so that their items start again."""
    for step in record.steps.values():
        if step.status != StageStatus.running:
            continue
        outputs = step.outputs.model_dump(mode="json")
        started = outputs.get("started")
        if isinstance(started, list):
            outputs["started"] = [
                ref for ref in started if not (isinstance(ref, dict) and ref.get("trajectory_id") in lost)
            ]
            step.outputs = ActivityOutputs(**outputs)


def requeue_pending(dispatcher: Dispatcher, before: datetime | None = None) -> None:
    store = dispatcher.store
    kept = store.run_requests()
    for record in store.runs_with_status([RunStatus.pending]):
        if record.owner is not None:  # a live `pier run` made it and is about to start it
            continue
        if before is not None and record.created >= before:  # this server's own, already queued
            continue
        tid = record.trajectory_id
        request = kept.get(tid)
        if request is None:
            store.save_run(failed_to_start(record, LOST_REQUEST))
            continue
        _submit(dispatcher, tid, request)
    log.info("re-queued %d pending run(s)", len(dispatcher.executor.pending()))


def _submit(dispatcher: Dispatcher, tid: str, request: dict) -> None:
    payload = Payload.restore(request, dispatcher.vault)
    lost = request.get("secret_param_names") or []
    if lost:
        dispatcher.store.append_event(
            tid,
            f"secret_params ({', '.join(lost)}) were not kept across the server's restart; "
            "the run starts without them",
            "prepare",
        )
    dispatcher.executor.submit(Job(tid, payload))


def finish_ended(dispatcher: Dispatcher, before: datetime | None = None) -> None:
    store = dispatcher.store
    for tid in store.run_requests():
        try:
            record = store.get_run(tid)
        except NotFoundError:
            store.drop_run_request(tid)
            continue
        if record.status.terminal and (before is None or record.created < before):
            dispatcher.finished(tid, None, record)
