"""The in-process executor: runs the lifecycle in a bounded pool of threads.

At most `max_workers` runs execute at once (so at most that many sandboxes
exist); the others wait as pending. A free slot goes to the collections in
turn (round robin), each collection's runs in the order they were submitted,
skipping a collection that runs its quota of runs at once already
(`concurrency`): one collection's backlog delays another's next run by at
most one slot's wait.
A pending run can be cancelled before it starts; a running one is stopped
through the lifecycle's cancel, which deletes its sandbox so the current stage
ends at once.

What a run means beyond "execute this context" (its stored record, webhooks,
live logs) belongs to the caller, through RunHooks.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from pier.errors import PierError
from pier.executors.base import CancelOutcome, Holding, Job
from pier.executors.slots import RunSlots
from pier.lifecycle.context import RunContext
from pier.lifecycle.runner import cancel as cancel_run
from pier.lifecycle.runner import execute
from pier.record import Trajectory

log = logging.getLogger(__name__)

__all__ = ["CancelOutcome", "InProcessExecutor", "Job", "RunHooks"]


class RunHooks(Protocol):
    def context(self, job: Job) -> RunContext:
        """The run's context, ready for execute. May raise: the run then ends unrun."""

    def ended(self, job: Job, record: Trajectory | None, error: BaseException | None) -> None:
        """The run is over; record is None when it never got going, and error says why."""

    def cancelled_before_start(self, job: Job) -> None:
        """The run was cancelled while it waited."""


class SharedLock:
    """Many holders in shared mode, or one in exclusive mode. Record saves of
    different runs share it (they must not wait on each other: a burst of runs
    would queue behind one lock); stop() takes it exclusively, so no save is in
    flight when it flips the flag, and none starts after."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


QUOTA_RECHECK_SEC = 5.0  # an admin's raised quota lets waiting runs start within this


def collection_of(job: Job) -> str:
    return getattr(job.payload, "collection", "") or ""


class FairQueue:
    """Pending runs, by collection; `next` serves the collections in turn: the
    one served least recently first, so a collection whose queue emptied and
    filled again does not jump the turn. Not thread-safe: the executor's lock
    guards it."""

    def __init__(self) -> None:
        self._queues: dict[str, OrderedDict[str, Job]] = {}  # in the order they got runs
        self._served: dict[str, int] = {}  # collection -> when it last got a slot
        self._turn = 0

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def add(self, job: Job) -> None:
        self._queues.setdefault(collection_of(job), OrderedDict())[job.trajectory_id] = job

    def remove(self, trajectory_id: str) -> Job | None:
        for collection, queue in self._queues.items():
            job = queue.pop(trajectory_id, None)
            if job is not None:
                if not queue:
                    del self._queues[collection]
                return job
        return None

    def ids(self) -> list[str]:
        return [tid for queue in self._queues.values() for tid in queue]

    def __contains__(self, trajectory_id: object) -> bool:
        return any(trajectory_id in queue for queue in self._queues.values())

    def next(self, may_start: Callable[[str], bool]) -> Job | None:
        """The oldest run of the collection served least recently among those
        that may start one now."""
        startable = [c for c in self._queues if may_start(c)]
        if not startable:
            return None
        collection = min(startable, key=lambda c: self._served.get(c, -1))
        queue = self._queues[collection]
        _tid, job = queue.popitem(last=False)
        if not queue:
            del self._queues[collection]
        self._turn += 1
        self._served[collection] = self._turn
        return job


class InProcessExecutor:
    durable = False  # its runs die with this process

    def __init__(
        self,
        hooks: RunHooks,
        max_workers: int,
        name: str = "pier-run",
        concurrency: Callable[[str], int | None] = lambda _collection: None,
        slots: RunSlots | None = None,
    ):
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._hooks = hooks
        self._max_workers = max_workers
        self._name = name
        # a collection's runs at once (None: no limit of its own), counted with
        # its fan-outs' children, who take their slots from the same count
        self._slots = slots or RunSlots(concurrency, None, counts_top_level=True)
        self._slots.on_release(self._wake)
        self._lock = threading.Condition()
        self._save_lock = SharedLock()  # orders record saves against stop(), not each other
        self._pending = FairQueue()
        self._running: dict[str, RunContext | None] = {}
        self._cancelled: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._holding = False  # draining: runs in flight go on, queued ones wait for the next start

    @property
    def max_workers(self) -> int:
        return self._max_workers

    def start(self) -> None:
        for number in range(self._max_workers):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError("the executor is stopped")
            self._pending.add(job)
            self._lock.notify_all()

    def pending(self) -> list[str]:
        with self._lock:
            return self._pending.ids()

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def holding(self, trajectory_id: str) -> Holding | None:
        with self._lock:
            held = trajectory_id in self._pending or trajectory_id in self._running
        return Holding(open=True) if held else None

    def ready(self) -> str | None:
        return "the server is stopping" if self._stopped or self._holding else None

    def hold(self) -> None:
        """Start no more runs; those running go on (a shutdown's drain)."""
        with self._lock:
            self._holding = True
            self._lock.notify_all()

    def cancel(self, trajectory_id: str) -> CancelOutcome | None:
        """Cancel a run this executor holds; None when it holds no such run."""
        with self._lock:
            job = self._pending.remove(trajectory_id)
            if job is None and trajectory_id not in self._running:
                return None
            if job is None:
                self._cancelled.add(trajectory_id)
                ctx = self._running[trajectory_id]
        if job is not None:
            self._hooks.cancelled_before_start(job)
            return "pending"
        if ctx is not None:  # else it is getting its context: _run cancels it once it has one
            cancel_run(ctx)
        return "running"

    def stop(self, interrupt: Callable[[RunContext], None] | None = None) -> list[str]:
        """Start nothing more; hand each running run's context to `interrupt`
        (which must end it); return the ids still pending (kept for a restart).
        The guarded record saves of running runs are dropped from now on, so
        what `interrupt` records is what stays."""
        with self._save_lock.exclusive(), self._lock:
            self._stopped = True
            self._lock.notify_all()
            running = [ctx for ctx in self._running.values() if ctx is not None]
            pending = self._pending.ids()
        for ctx in running:
            if interrupt is not None:
                interrupt(ctx)
        return pending

    def join(self, timeout: float | None = None) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def _work(self) -> None:
        while True:
            with self._lock:
                job = None
                while not self._stopped:
                    with self._slots.atomic():  # no child takes the slot between the check and the take
                        job = None if self._holding else self._pending.next(self._slots.may_take)
                        if job is not None:
                            self._slots.take(collection_of(job))
                            break
                    # nothing startable: a run ending, a submit or a quota's change wakes us
                    self._lock.wait(QUOTA_RECHECK_SEC if len(self._pending) else None)
                if self._stopped or job is None:
                    return
                self._running[job.trajectory_id] = None
            try:
                self._run(job)
            finally:
                self._slots.release(collection_of(job))

    def _wake(self) -> None:
        """A slot freed (a run or a fan-out's child ended): a waiting run may start."""
        with self._lock:
            self._lock.notify_all()

    def _run(self, job: Job) -> None:
        record: Trajectory | None = None
        error: BaseException | None = None
        try:
            ctx = self._hooks.context(job)
            self._guard_saves(ctx)
            with self._lock:
                if self._stopped:  # the server is going: the run stays pending for its restart
                    return
                self._running[job.trajectory_id] = ctx
                cancelled = job.trajectory_id in self._cancelled
            if cancelled:
                cancel_run(ctx)
            record = execute(ctx)
        except PierError as exc:  # e.g. a secret the runbook requires was deleted meanwhile
            error = exc
            log.warning("run %s could not start: %s", job.trajectory_id, exc)
        except Exception as exc:
            error = exc
            log.exception("run %s could not be run", job.trajectory_id)
        finally:
            with self._lock:
                self._running.pop(job.trajectory_id, None)
                self._cancelled.discard(job.trajectory_id)
                stopped = self._stopped
                self._lock.notify_all()  # a collection at its quota may start its next run
            if not stopped:
                self._ended(job, record, error)

    def _ended(self, job: Job, record: Trajectory | None, error: BaseException | None) -> None:
        try:
            self._hooks.ended(job, record, error)
        except Exception:  # a worker must survive its hooks: the next run is waiting
            log.exception("finishing run %s failed", job.trajectory_id)

    def _guard_saves(self, ctx: RunContext) -> None:
        save = ctx.save_record

        def guarded(record: Trajectory) -> None:
            with self._save_lock.shared():  # stop() flips the flag holding it exclusively
                if self._stopped:
                    return
                save(record)

        ctx.save_record = guarded
