"""What running one accepted run needs, wherever it runs (the API's process
for the in-process executor, a `pier worker` for Temporal): its ports (store,
storage, sandbox backend through Services; the vault that opens its secrets;
the event sink that wakes live followers; webhooks) and the hooks an executor
calls to build its context and to finish it."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from pier.errors import InputError, NotFoundError, PierError
from pier.executors.base import Job
from pier.executors.slots import RunSlots
from pier.executors.spec import Payload
from pier.lifecycle.context import RunContext, scratch_dir
from pier.lifecycle.files import resolve_api_path
from pier.lifecycle.outcomes import Outcome, cancelled_waiting, failed_to_start
from pier.lifecycle.sandbox_env import sandbox_env
from pier.lifecycle.start import Observer, RunRequest, Services, new_context
from pier.lifecycle.uploads import expired_message, upload_of
from pier.policies.quotas import CollectionQuotas
from pier.policies.trial import Trials
from pier.policies.webhooks import Delivery, WebhookSender
from pier.record import Trajectory
from pier.tasks.resolve import resolve
from pier.vault import Vault

log = logging.getLogger(__name__)

# Called with a run's id whenever its log grows or it changes: wakes followers.
EventSink = Callable[[str], None]


@dataclass
class RunPorts:
    services: Services
    vault: Vault
    publish: EventSink
    # None: the executor delivers webhooks itself (a fleet's workflow does, from
    # an activity Temporal retries), so finishing a run here sends none
    webhooks: WebhookSender | None
    # Told each run's id once the run has ended here (the experiment scheduler
    # wakes on it to start the next attempt at once, not at its next poll).
    ended: EventSink | None = None

    @property
    def store(self):
        return self.services.run_store


class LifecycleHooks:
    """The executor's RunHooks: a run's context from its payload, its end
    recorded, its webhook sent, its kept request dropped, its followers woken."""

    def __init__(self, ports: RunPorts):
        self.ports = ports
        self.services = ports.services
        self.store = ports.services.run_store  # a run's bookkeeping rides out a short outage
        self.vault = ports.vault
        self.trials = Trials(ports.services.store, ports.services.settings)
        self.quotas = CollectionQuotas(
            ports.services.store, lambda: ports.services.storage, ports.services.settings
        )
        # the runs at once of this process, fan-out children included; the
        # in-process executor counts its own runs in it too (make_executor)
        self.slots = RunSlots(self.quotas.concurrent_runs, ports.services.settings.max_concurrent_runs)

    def without_webhooks(self) -> LifecycleHooks:
        """These hooks, for processes whose runs' webhooks the workflow delivers."""
        return LifecycleHooks(replace(self.ports, webhooks=None))

    # what a run needs to start

    def environment(self, payload: Payload) -> dict[str, str]:
        encrypted = self.store.get_env_encrypted(payload.collection)
        collection_env = {name: self.vault.decrypt(value) for name, value in encrypted.items()}
        if payload.use_trial_keys:  # the collection's own keys win
            collection_env = {**self.trials.keys(), **collection_env}
        if payload.task.is_workflow:  # its model steps read provider keys; no sandbox gets any
            return {**collection_env, **(payload.secret_params or {})}
        step = resolve(payload.task, payload.run_params)
        return sandbox_env(step, collection_env, payload.secret_params)

    def inputs_dir(self, trajectory_id: str) -> Path:
        """Where a run's inputs are copied from object storage (a local store needs no copy)."""
        return scratch_dir(self.services.settings, trajectory_id) / "inputs"

    def request(self, payload: Payload, trajectory_id: str, env: dict[str, str]) -> RunRequest:
        storage = self.services.storage
        inputs = self.inputs_dir(trajectory_id)

        def resolve_file(path: str) -> Path:
            try:
                found = resolve_api_path(storage, payload.collection, path)
            except NotFoundError:
                raise InputError(
                    expired_message(path, self.services.settings.upload_ttl_sec)
                    or f"init_params.file_paths: {path!r} is not a file of collection {payload.collection!r}: "
                    "upload it with POST /api/v1/sandbox/upload and pass a file path it returns"
                ) from None
            upload = upload_of(path)
            if upload:
                storage.touch_upload(*upload)  # named by a run: its time to expire starts again
            # one folder per file: two files of one name from different places stay apart
            return storage.fetch(found.key, inputs / uuid.uuid4().hex / PurePosixPath(found.key).name)

        return RunRequest(
            collection=payload.collection,
            task_name=payload.task_name,
            task=payload.task,
            run_params=payload.run_params,
            env=env,
            resolve_file=resolve_file,
            trajectory_id=trajectory_id,
            operator_keys=self.operator_keys(env),
        )

    def operator_keys(self, env: dict[str, str]) -> frozenset[str]:
        """The variables of env holding one of the server's trial keys, by value, so
        that a runbook secret mapping another name onto one is caught too."""
        held = set(self.trials.keys().values())
        return frozenset(name for name, value in env.items() if value in held)

    # RunHooks: an executor calls these from its worker threads

    def context(self, job: Job) -> RunContext:
        payload: Payload = job.payload
        tid = job.trajectory_id
        request = self.request(payload, tid, self.environment(payload))
        publish = self.ports.publish
        observer = Observer(on_log=lambda _stage, _line: publish(tid), on_step=lambda _s: publish(tid))
        ctx = new_context(self.services, request, observer, record=self.store.get_run(tid))
        if payload.task.is_workflow:
            ctx.children = ChildRuns(self, payload, holds_slot=self.slots.counts_top_level)
        return ctx

    def ended(self, job: Job, record: Trajectory | None, error: BaseException | None) -> None:
        if record is None:
            message = (
                str(error)
                if isinstance(error, PierError)
                else f"internal error starting the run ({error!r}): see the server log"
            )
            outcome = Outcome.invalid if isinstance(error, InputError) else Outcome.infra
            record = failed_to_start(self.store.get_run(job.trajectory_id), message, outcome)
            self.store.save_run(record)
        self.finished(job.trajectory_id, job.payload, record)

    def cancelled_before_start(self, job: Job) -> None:
        record = cancelled_waiting(self.store.get_run(job.trajectory_id))
        self.store.save_run(record)
        self.store.append_event(job.trajectory_id, record.error or "cancelled", "prepare")
        self.finished(job.trajectory_id, job.payload, record)

    def finished(self, trajectory_id: str, payload: Payload | None, record: Trajectory | None = None) -> None:
        """Send the webhook (unless the executor does), forget the kept
        request, wake followers."""
        if payload is None and self.ports.webhooks is not None:
            kept = self.store.run_request(trajectory_id)
            payload = Payload.restore(kept, self.vault) if kept else None
        if payload is not None and payload.webhook_url and self.ports.webhooks is not None:
            record = record or self.store.get_run(trajectory_id)
            body = record.model_dump_json().encode()
            self.ports.webhooks.send(
                Delivery(payload.webhook_url, payload.webhook_secret, body, trajectory_id, record.collection)
            )
        self.store.drop_run_request(trajectory_id)
        shutil.rmtree(self.inputs_dir(trajectory_id), ignore_errors=True)
        self.ports.publish(trajectory_id)
        if self.ports.ended is not None:
            self.ports.ended(trajectory_id)


class ChildRuns:
    """A workflow's fan-out children (pier.lifecycle.workflow.Children): each an
    ordinary run of the parent's collection, stored with its own record, log and
    outputs and linked to its parent (`parent_trajectory_id`), run to its end
    in the fan-out's thread. The collection's environment and the parent's
    secret_params and trial-key choice go with it. Each child runs in one of
    the process's run slots (hooks.slots), so its collection's concurrent_runs
    quota counts it; `holds_slot`: the parent holds one, which it lends to its
    children while it waits on them."""

    def __init__(self, hooks: LifecycleHooks, parent: Payload, holds_slot: bool = False):
        self.hooks = hooks
        self.parent = parent
        self.holds_slot = holds_slot
        self._running: dict[str, RunContext] = {}  # the children running now, to cancel with the parent
        self._lock = threading.Lock()
        self._cancelled = False

    def cancel_all(self) -> None:
        """The parent was cancelled: every running child is (and none starts after)."""
        from pier.lifecycle.runner import cancel

        with self._lock:
            self._cancelled = True
            running = list(self._running.values())
        for ctx in running:
            cancel(ctx)

    def payload(self, parent: Trajectory, task: str, init_params: dict, purse=None) -> Payload:
        """A child's payload: the task of the parent's collection (NotFoundError,
        naming it, when there is none) with the item's init_params; a runbook
        child's model_budget is what is left of its parent's (`purse`), or its
        own where tighter."""
        from pier.tasks.model import Task

        stored = self.hooks.store.get_task(parent.collection, task)  # NotFoundError: the message names it
        child_task = Task.model_validate(stored.definition)
        shared = purse is not None and purse.budget is not None  # the parent's budget caps its children
        if not child_task.is_workflow:
            init_params = runbook_child_params(child_task, init_params)
            left = purse.child_budget() if shared else None
            if left is not None:  # what is left of the parent's, or the child's own where tighter
                own = {
                    **(child_task.init_params.get("model_budget") or {}),
                    **(init_params.get("model_budget") or {}),
                }
                init_params = {**init_params, "model_budget": {
                    k: min(v, own[k]) if isinstance(own.get(k), int | float) else v for k, v in left.items()}}  # fmt: skip
        return replace(self.parent, task_name=task, task=child_task, run_params=dict(init_params),
                       webhook_url=None, webhook_secret=None)  # fmt: skip

    def create(self, parent: Trajectory, step: str, payload: Payload, tid: str) -> Trajectory:
        """The child's pending record, linked to its parent; the one stored
        already when a record of that id exists (a fleet's activity tried again)."""
        store = self.hooks.store
        try:
            return store.get_run(tid, parent.collection)
        except NotFoundError:
            pass
        child_task, task, init_params = payload.task, payload.task_name, payload.run_params
        kw = {"parent_trajectory_id": parent.trajectory_id, "parent_task": parent.name, "parent_step": step}
        if child_task.is_workflow:
            record = Trajectory.new_workflow(tid, parent.collection, task, child_task, init_params, **kw)
        else:
            record = Trajectory.new(tid, parent.collection, task, init_params=init_params,
                                    step_config=child_task.run_step().model_dump(mode="json"), **kw)  # fmt: skip
        store.create_run(record)
        return record

    def run(self, parent: Trajectory, step: str, task: str, init_params: dict, created=None,
            purse=None) -> Trajectory:  # fmt: skip
        from pier.lifecycle.runner import execute

        store = self.hooks.store
        shared = purse is not None and purse.budget is not None
        payload = self.payload(parent, task, init_params, purse)
        child_task = payload.task
        tid = uuid.uuid4().hex
        env = self.hooks.environment(payload)
        record = self.create(parent, step, payload, tid)
        if created is not None:
            created(tid)
        try:
            request = self.hooks.request(payload, tid, env)
            publish = self.hooks.ports.publish
            observer = Observer(on_log=lambda _s, _l: publish(tid), on_step=lambda _s: publish(tid))
            ctx = new_context(self.hooks.services, request, observer, record=record)
        except BaseException as exc:
            ended = failed_to_start(record, str(exc) if isinstance(exc, PierError) else repr(exc))
            store.save_run(ended)
            if not isinstance(exc, Exception):
                raise
            return ended
        if child_task.is_workflow:
            ctx.children = ChildRuns(self.hooks, payload, holds_slot=True)
            if shared:
                ctx.purse = purse
        with self._lock:
            self._running[tid] = ctx
            if self._cancelled:
                ctx.cancel.set()
        try:
            with self.hooks.slots.hold(
                parent.collection, lambda why: ctx.log(f"waiting for a run slot: {why}", "prepare")
            ):
                ended = execute(ctx)
            if shared and not child_task.is_workflow:  # a runbook child's spend counts against its parent's
                usage = (
                    ended.steps["run"].outputs.model_dump(mode="json").get("usage")
                    if "run" in ended.steps
                    else None
                )
                purse.spend(usage if isinstance(usage, dict) else {}, reserved=0)
            return ended
        finally:
            with self._lock:
                self._running.pop(tid, None)
            shutil.rmtree(self.hooks.inputs_dir(tid), ignore_errors=True)
            publish(tid)

    @contextmanager
    def waiting(self, log: Callable[[str], None] | None = None) -> Iterator[None]:
        """The parent waits on its children: its slot is theirs meanwhile, and
        it takes one back (waiting, if its collection is at its quota) after."""
        if not self.holds_slot:
            yield
            return
        with self.hooks.slots.lend(self.parent.collection, log):
            yield

    def get(self, trajectory_id: str) -> Trajectory:
        return self.hooks.store.get_run(trajectory_id, self.parent.collection)

    def end_lost(self, child: Trajectory, message: str) -> None:
        from pier.lifecycle.outcomes import end_record
        from pier.record import RunStatus

        self.hooks.store.append_event(child.trajectory_id, message, child.failed_stage or "prepare")
        self.hooks.store.save_run(end_record(child, RunStatus.failed, message))
        self.hooks.ports.publish(child.trajectory_id)


def runbook_child_params(task, init_params: dict) -> dict:
    """A runbook child's init_params: what a runbook does not read as a
    parameter (the fan-out's item, under its item_param_name) becomes one of
    its {{variables}} too, over the task's own vars (docs/workflows.md)."""
    from pier.tasks.model import KNOWN_INIT_PARAMS

    extra = {k: v for k, v in init_params.items() if k not in KNOWN_INIT_PARAMS}
    if not extra:
        return dict(init_params)
    kept = {k: v for k, v in init_params.items() if k in KNOWN_INIT_PARAMS}
    variables = {**(task.init_params.get("vars") or {}), **(init_params.get("vars") or {}), **extra}
    return {**kept, "vars": {k: v if isinstance(v, str) else json.dumps(v) for k, v in variables.items()}}
