"""What a starting server does about the runs a previous one left: nothing
accepted is lost, and nothing a live process runs is touched.

- running, and its owner (the process that ran it) is gone: its sandbox with
  the agent's work in it cannot be resumed, so the run fails saying so (and is
  swept). A run whose owner still runs (a `pier run` on the same PIER_HOME, a
  zombie aside) is left to it;
- pending: it never started, so it starts now, in the order it was accepted
  (a pending run with an owner is a `pier run`'s, not the server's to start);
- ended but with a kept request: the server stopped before finishing up, so
  its webhook is sent now.

An owner on another host cannot be judged from here: such a running run (or
one with no owner, from an older pier) is taken for the previous server's, so
one server per store still holds.
With a durable executor (Temporal) a run's owner is its workflow, not a
server: a starting replica leaves running runs alone, and a pending one is only
submitted again (a no-op when its workflow exists).
"""

from __future__ import annotations

import logging

from pier.api.dispatcher import Dispatcher, Payload
from pier.errors import NotFoundError
from pier.executors.base import Job
from pier.lifecycle.background import sweep_once
from pier.lifecycle.orphans import end_orphaned_runs
from pier.lifecycle.outcomes import failed_to_start
from pier.record import RunStatus, Trajectory
from pier.sandbox.sweeper import owner_alive

log = logging.getLogger(__name__)

LOST_REQUEST = "the server lost this run's request before it started; run it again"


def recover(dispatcher: Dispatcher) -> None:
    if dispatcher.executor.durable:
        requeue_pending(dispatcher)
        return
    services = dispatcher.services
    for record in end_orphaned_runs(services.store, services.settings, judge=abandoned_at_start):
        log.warning("run %s was running when its process stopped: marked failed", record.trajectory_id)
    sweep_once(lambda: services.backend, services.store, services.settings)
    requeue_pending(dispatcher)
    finish_ended(dispatcher)


def abandoned_at_start(record: Trajectory) -> bool:
    """Whether a starting server ends this unfinished run: its owner is gone, or
    it is running and its owner cannot be judged (see the module's docstring)."""
    alive = owner_alive(record.owner) if record.owner else None
    if record.status == RunStatus.running:
        return alive is not True
    return alive is False


def requeue_pending(dispatcher: Dispatcher) -> None:
    store = dispatcher.store
    kept = store.run_requests()
    for record in store.runs_with_status([RunStatus.pending]):
        if record.owner is not None:  # a live `pier run` made it and is about to start it
            continue
        tid = record.trajectory_id
        request = kept.get(tid)
        if request is None:
            store.save_run(failed_to_start(record, LOST_REQUEST))
            continue
        payload = Payload.restore(request, dispatcher.vault)
        lost = request.get("secret_param_names") or []
        if lost:
            store.append_event(
                tid,
                f"secret_params ({', '.join(lost)}) were not kept across the server's restart; "
                "the run starts without them",
                "prepare",
            )
        dispatcher.executor.submit(Job(tid, payload))
    log.info("re-queued %d pending run(s)", len(dispatcher.executor.pending()))


def finish_ended(dispatcher: Dispatcher) -> None:
    store = dispatcher.store
    for tid in store.run_requests():
        try:
            record = store.get_run(tid)
        except NotFoundError:
            store.drop_run_request(tid)
            continue
        if record.status.terminal:
            dispatcher.finished(tid, None, record)
