"""Starting a routine's runs on the server: at its ticks (the scheduler) and on
request (run-now). Each run goes through the dispatcher like any API run and
carries `triggered_by_routine_id`."""

from __future__ import annotations

import contextlib
import logging
import uuid

from pier.db import StoredRoutine
from pier.errors import InputError, NotFoundError, PierError
from pier.lifecycle.outcomes import Outcome, failed_to_start
from pier.record import Trajectory, utcnow
from pier.routines import Routines
from pier.server.dispatcher import Dispatcher, RunParams
from pier.vault import Vault

log = logging.getLogger(__name__)


def start_run(dispatcher: Dispatcher, routine: StoredRoutine, vault: Vault) -> Trajectory:
    """Accept one run of the routine's task with its init_params, secrets and
    webhook; InputError or NotFoundError (the caller's to answer) when it cannot run."""
    fired = Routines(dispatcher.store, vault=vault).fired(routine)
    params = RunParams(fired.init_params, fired.secret_params, fired.webhook_url, fired.webhook_secret)
    record = dispatcher.accept(routine.collection, routine.task, params, routine_id=routine.id)
    _note(dispatcher, routine, record)
    return record


def fire(dispatcher: Dispatcher, routine: StoredRoutine, vault: Vault) -> Trajectory:
    """A tick: start the run, or, when it cannot start (the task was deleted, a
    required secret is missing), store it failed saying why, so the routine's
    runs show every tick."""
    try:
        record = start_run(dispatcher, routine, vault)
    except PierError as exc:
        record = Trajectory.new(
            uuid.uuid4().hex, routine.collection, routine.task,
            init_params=dict(routine.init_params), triggered_by_routine_id=routine.id,
        )  # fmt: skip
        record = failed_to_start(
            record,
            f"routine {routine.name!r} could not start its run: {exc}",
            Outcome.invalid if isinstance(exc, InputError | NotFoundError) else Outcome.infra,
        )
        dispatcher.store.create_run(record)
        _note(dispatcher, routine, record)
    log.info("routine %s (%s/%s/%s) fired run %s", routine.id, routine.collection, routine.task,
             routine.name, record.trajectory_id)  # fmt: skip
    return record


def _note(dispatcher: Dispatcher, routine: StoredRoutine, record: Trajectory) -> None:
    with contextlib.suppress(NotFoundError):  # deleted meanwhile: its run stands on its own
        dispatcher.store.update_routine(
            routine.id, last_run_at=utcnow(), last_trajectory_id=record.trajectory_id
        )
