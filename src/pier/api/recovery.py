"""What a starting server does about the runs a previous one left: nothing
accepted is lost.

- running: the process that ran it is gone, and its sandbox with the agent's
  work in it cannot be resumed, so the run fails saying so (and is swept);
- pending: it never started, so it starts now, in the order it was accepted;
- ended but with a kept request: the server stopped before finishing up, so
  its webhook is sent now.

With the in-process executor, one server per store: a second server on the
same database would take the first one's running runs for interrupted ones.
With a durable executor (Temporal) a run's owner is its workflow, not a
server: a starting replica leaves running runs alone, and a pending one is only
submitted again (a no-op when its workflow exists).
"""

from __future__ import annotations

import logging

from pier.api.background import sweep_once
from pier.api.dispatcher import Dispatcher, Payload
from pier.api.outcomes import SERVER_STOPPED, failed_to_start, interrupted
from pier.errors import NotFoundError
from pier.executors.base import Job
from pier.record import RunStatus

log = logging.getLogger(__name__)

LOST_REQUEST = "the server lost this run's request before it started; run it again"


def recover(dispatcher: Dispatcher) -> None:
    if dispatcher.executor.durable:
        requeue_pending(dispatcher)
        return
    store = dispatcher.store
    for record in store.runs_with_status([RunStatus.running]):
        store.append_event(record.trajectory_id, SERVER_STOPPED, "save")
        store.save_run(interrupted(record))
        log.warning("run %s was running when the server stopped: marked failed", record.trajectory_id)
    services = dispatcher.services
    sweep_once(lambda: services.backend, services.store, services.settings)
    requeue_pending(dispatcher)
    finish_ended(dispatcher)


def requeue_pending(dispatcher: Dispatcher) -> None:
    store = dispatcher.store
    kept = store.run_requests()
    for record in store.runs_with_status([RunStatus.pending]):
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
