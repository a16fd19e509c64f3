"""The API's runs: accepted (checked, stored, queued), started on the executor
with the environment they may see, cancelled, and finished (webhook, live
followers woken, kept request dropped).

A run's request is stored with its pending record, so that a server that
restarts starts it again (see recovery.py); secret values are never stored:
`secret_params` live in memory for the one run they were sent with.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pier.agents.upstreams import Upstreams
from pier.db.requests import QueueFull
from pier.errors import InputError, NotFoundError, ServiceUnavailable
from pier.executors.base import Executor, Job
from pier.executors.ports import LifecycleHooks
from pier.executors.spec import Payload
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import SERVER_STOPPED, cancelled, drain_expired, interrupted
from pier.lifecycle.runner import cancel as cancel_run
from pier.lifecycle.start import RunRequest, preflight
from pier.lifecycle.uploads import file_of_id, refuse_file_ids
from pier.lifecycle.workflow import preflight_workflow
from pier.policies.webhooks import check_url
from pier.record import Label, RunStatus, Trajectory
from pier.redact import Redactor
from pier.tasks.model import Task
from pier.telemetry import metrics, tracing

__all__ = ["Dispatcher", "Payload", "RunParams"]

log = logging.getLogger(__name__)

DRAIN_RETRY_AFTER_SEC = 30  # what a run refused while the server drains is told to wait
DRAIN_POLL_SEC = 0.5


@dataclass(frozen=True)
class RunParams:
    """What a caller sends with one run."""

    init_params: dict[str, Any] = field(default_factory=dict)
    secret_params: dict[str, str] = field(default_factory=dict)
    webhook_url: str | None = None
    webhook_secret: str | None = None
    use_trial_keys: bool = False
    subscription_credential: str | None = None
    # the client's Idempotency-Key: a retry with it gets the first run back
    idempotency_key: str | None = None


# A subscription credential names the provider whose own API the run uses, with
# the collection's key for it.
SUBSCRIPTION_PROVIDERS = {"anthropic": "anthropic", "codex": "openai"}


def split_webhook(params: RunParams) -> RunParams:
    """webhook_url/webhook_secret may come inside init_params too; they never stay
    there, where they would be stored in the run's record."""
    init = dict(params.init_params)
    url = init.pop("webhook_url", None) or params.webhook_url
    secret = init.pop("webhook_secret", None) or params.webhook_secret
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise InputError("webhook_url must be an http:// or https:// URL")
    if secret is not None and not isinstance(secret, str):
        raise InputError("webhook_secret must be a string")
    return replace(params, init_params=init, secret_params=dict(params.secret_params),
                   webhook_url=url, webhook_secret=secret)  # fmt: skip


def with_subscription(params: RunParams) -> RunParams:
    """A subscription credential becomes the run's model_provider."""
    name = params.subscription_credential
    if name is None:
        return params
    provider = SUBSCRIPTION_PROVIDERS.get(name)
    if provider is None:
        known = ", ".join(sorted(SUBSCRIPTION_PROVIDERS))
        raise InputError(
            f"subscription_credential: pier cannot run on a {name!r} subscription (it has: {known}); "
            "set the provider's API key in the collection's environment instead"
        )
    return replace(params, init_params={**params.init_params, "model_provider": provider})


class Dispatcher:
    """The API's side of runs; what executes them is the executor it is given,
    what building and finishing a run means is the hooks' (shared with workers)."""

    def __init__(self, hooks: LifecycleHooks, executor: Executor):
        self.hooks = hooks
        self.executor = executor
        self.services = hooks.services
        self.store = hooks.services.store  # a request is answered at once, not after retries
        self.vault = hooks.vault
        self.webhooks = hooks.ports.webhooks
        self.trials = hooks.trials
        self.draining: str | None = None  # why new runs are refused: the server is shutting down
        self._stop_reason = SERVER_STOPPED
        self._drained = threading.Event()

    # accepting and cancelling (called by routes, in worker threads)

    def accept(
        self, collection: str, task_name: str, params: RunParams, routine_id: int | None = None
    ) -> Trajectory:
        """Check, store and queue a run; InputError (422) when it cannot run.
        `routine_id` names the routine that starts it, if one does."""
        task = Task.model_validate(self.store.get_task(collection, task_name).definition)
        return self.accept_task(collection, task_name, task, params, routine_id)

    def accept_task(
        self,
        collection: str,
        task_name: str,
        task: Task,
        params: RunParams,
        routine_id: int | None = None,
        *,
        trajectory_id: str | None = None,
        labels: Sequence[Label] = (),
    ) -> Trajectory:
        """accept, for a task given whole rather than stored (`pier run --remote`,
        an experiment's runs, which choose their trajectory id and carry labels
        from the start). Atomic: the run is stored and submitted, or refused with
        nothing left (ServiceUnavailable, a 503, when the executor does not take
        it). With an idempotency key already used in the collection, the run it named."""
        if params.idempotency_key is not None:
            earlier = self.keyed_run(collection, params.idempotency_key)
            if earlier is not None:
                return earlier
        if self.draining is not None:
            raise ServiceUnavailable(
                f"{self.draining}: it takes no new runs; send the run again in a moment "
                "(to another server, or to this one once it is back)",
                retry_after=DRAIN_RETRY_AFTER_SEC,
            )
        params = self.with_file_ids(collection, with_subscription(split_webhook(params)))
        if params.webhook_url is not None:
            check_url(params.webhook_url, self.services.settings.outbound)
        continuing = bool((params.init_params or {}).get("continue_from"))
        self.hooks.quotas.check_new_run(collection, continuing)  # 429 when its queue is full
        payload = Payload(
            collection, task_name, task, params.init_params, params.secret_params,
            params.webhook_url, params.webhook_secret, params.use_trial_keys,
        )  # fmt: skip
        trajectory_id = trajectory_id or uuid.uuid4().hex
        payload, env = self._checked(payload, trajectory_id)
        if task.is_workflow:
            record = Trajectory.new_workflow(
                trajectory_id,
                collection,
                task_name,
                task,
                Redactor(env.values()).data(payload.run_params),
                triggered_by_routine_id=routine_id,
                webhook_url=payload.webhook_url,
                labels=list(labels),
            )
        else:
            record = Trajectory.new(
                trajectory_id,
                collection,
                task_name,
                init_params=Redactor(env.values()).data(payload.run_params),
                triggered_by_routine_id=routine_id,
                step_config=task.run_step().model_dump(mode="json"),
                webhook_url=payload.webhook_url,
                labels=list(labels),
            )
        record.trace_id = tracing.trace_id(trajectory_id)
        try:
            stored = self.store.enqueue_run(
                record,
                payload.stored(self.vault),
                params.idempotency_key,
                max_pending=self.hooks.quotas.queued_runs(collection),
            )
        except QueueFull as full:  # another accept took the last place since the check above
            raise self.hooks.quotas.queue_full(collection, full.waiting) from None
        if stored != trajectory_id:  # the same request, retried, won the race
            return self.store.get_run(stored)
        try:
            self.executor.submit(Job(trajectory_id, payload))
        except Exception as exc:
            self.store.drop_run(trajectory_id)  # refused: nothing is left to start or to sweep
            if isinstance(exc, ServiceUnavailable):
                raise
            raise ServiceUnavailable(
                f"the run could not be queued ({exc!r}); nothing was stored: try again"
            ) from exc
        metrics.runs_accepted.labels(metrics.collection_label(collection)).inc()
        return record

    def with_file_ids(self, collection: str, params: RunParams) -> RunParams:
        """init_params.files (ids from POST /api/v1/files) become storage paths
        in file_paths; an id put in file_paths itself is refused, naming the field."""
        init = dict(params.init_params)
        refuse_file_ids(init.get("file_paths"))
        ids = init.pop("files", None)
        if ids is None:
            return params
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InputError("init_params.files: give a list of file ids from POST /api/v1/files")
        try:
            paths = [file_of_id(self.services.storage, collection, i).key for i in ids]
        except NotFoundError as exc:
            raise InputError(f"init_params.files: {exc}") from None
        init["file_paths"] = [*(init.get("file_paths") or []), *paths]
        return replace(params, init_params=init)

    def keyed_run(self, collection: str, key: str) -> Trajectory | None:
        """The run an idempotency key already names in `collection`."""
        tid = self.store.run_for_key(collection, key)
        if tid is None:
            return None
        try:
            return self.store.get_run(tid)
        except NotFoundError:
            return None

    def check_task(self, collection: str, task_name: str, task: Task, params: RunParams) -> None:
        """InputError when accept_task would refuse this run; nothing is stored
        or counted (an experiment checks each of its cells so before it starts)."""
        params = self.with_file_ids(collection, with_subscription(split_webhook(params)))
        payload = Payload(collection, task_name, task, params.init_params, params.secret_params,
                          params.webhook_url, params.webhook_secret, params.use_trial_keys)  # fmt: skip
        self._preflight(payload, uuid.uuid4().hex)

    def _checked(self, payload: Payload, trajectory_id: str) -> tuple[Payload, dict[str, str]]:
        """The payload (with trial keys when it asked, or when its collection
        activated the trial and the run cannot start without them) and its
        environment, once preflight passes; a trial run is counted."""
        if payload.use_trial_keys:
            self.trials.require(payload.collection)
        try:
            env = self._preflight(payload, trajectory_id)
        except InputError as without:
            if payload.use_trial_keys or not self.trials.eligible(payload.collection):
                raise
            try:
                payload = replace(payload, use_trial_keys=True)
                env = self._preflight(payload, trajectory_id)
            except InputError:
                raise without from None  # the trial keys do not help: say what is wrong
        if payload.use_trial_keys:
            self.trials.take(payload.collection)
        return payload, env

    def _preflight(self, payload: Payload, trajectory_id: str) -> dict[str, str]:
        env = self.environment(payload)
        if payload.task.is_workflow:  # its steps were checked when the task was made; its params now
            upstreams = Upstreams.of(self.services.settings, payload.collection)
            operator_keys = self.hooks.operator_keys(env)
            preflight_workflow(payload.task, payload.run_params, env, upstreams, operator_keys)
            return env
        try:
            preflight(self.request(payload, trajectory_id, env), self.services.settings)
        finally:  # copies of stored inputs are made again when the run starts
            shutil.rmtree(self.hooks.inputs_dir(trajectory_id), ignore_errors=True)
        return env

    def cancel(self, record: Trajectory) -> RunStatus:
        """Cancel a run; its status as the caller should see it now."""
        if record.status.terminal:
            return record.status
        if self.executor.cancel(record.trajectory_id) is not None:
            return RunStatus.cancelled
        # The executor no longer holds it: it has just ended (and saved its end,
        # which the store now shows), or it was never this server's to run.
        current = self.store.get_run(record.trajectory_id, record.collection)
        if current.status.terminal:
            return current.status
        ended = cancelled(current)
        self.store.save_run(ended)  # the sweeper removes any sandbox it left
        self.finished(record.trajectory_id, None, ended)
        return RunStatus.cancelled

    # what a run needs to start: the hooks' (a worker builds it the same way)

    def environment(self, payload: Payload) -> dict[str, str]:
        return self.hooks.environment(payload)

    def request(self, payload: Payload, trajectory_id: str, env: dict[str, str]) -> RunRequest:
        return self.hooks.request(payload, trajectory_id, env)

    def finished(self, trajectory_id: str, payload: Payload | None, record: Trajectory | None = None) -> None:
        """Send the webhook, forget the kept request, wake followers."""
        self.hooks.finished(trajectory_id, payload, record)

    # the end of the server

    def drain(self, timeout_sec: float, signal_name: str = "SIGTERM") -> list[str]:
        """A shutdown's first half: refuse new runs (503, Retry-After), start no
        more of the queued ones (they stay pending for the next start), and wait
        up to `timeout_sec` for the runs in flight to end. The ids still running
        then; `stop` ends them saying the shutdown did not wait for them."""
        self.draining = f"the server is shutting down ({signal_name})"
        hold = getattr(self.executor, "hold", None)
        if hold is not None:
            hold()
        running = self.executor.running()
        log.info("draining: new runs are refused; waiting up to %gs (PIER_DRAIN_TIMEOUT_SEC) for %d run(s) "
                 "in flight", timeout_sec, len(running))  # fmt: skip
        deadline = time.monotonic() + timeout_sec
        while running and not self._drained.wait(min(DRAIN_POLL_SEC, max(deadline - time.monotonic(), 0))):
            running = self.executor.running()
            if time.monotonic() >= deadline:
                break
        if running:
            self._stop_reason = drain_expired(signal_name, timeout_sec)
            log.warning("drain: %d run(s) did not end within %gs and end now: %s",
                        len(running), timeout_sec, ", ".join(running))  # fmt: skip
        else:
            log.info("drain: no run in flight; stopping")
        return running

    def stop(self) -> None:
        """Start nothing more. Runs in progress end failed, saying the server
        stopped, and lose their sandboxes; their kept requests stay, so the next
        start sends their webhooks. Pending runs stay pending for that start."""
        self._drained.set()  # a drain still waiting (a second signal) waits no more
        self.executor.stop(interrupt=self._interrupt)

    def _interrupt(self, ctx: RunContext) -> None:
        tid = ctx.record.trajectory_id
        try:
            self.store.save_run(interrupted(self.store.get_run(tid), self._stop_reason))
            self.store.append_event(tid, self._stop_reason, "save")
        except Exception:
            log.exception("could not record that run %s was interrupted", tid)
        ctx.stopped_as = self._stop_reason  # its trace and metrics end as its record: failed, saying why
        cancel_run(ctx)
        self.hooks.ports.publish(tid)
