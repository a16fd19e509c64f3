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
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from pier.api.bus import RunBus
from pier.api.files import resolve_api_path
from pier.api.outcomes import SERVER_STOPPED, cancelled, cancelled_waiting, failed_to_start, interrupted
from pier.api.trial import Trials
from pier.api.uploads import expired_message, upload_of
from pier.api.webhooks import Delivery, WebhookSender
from pier.errors import InputError, NotFoundError, PierError
from pier.executors.inprocess import InProcessExecutor, Job
from pier.lifecycle.context import RunContext, scratch_dir
from pier.lifecycle.runner import cancel as cancel_run
from pier.lifecycle.sandbox_env import sandbox_env
from pier.lifecycle.service import Observer, RunRequest, Services, new_context, preflight
from pier.record import RunStatus, Trajectory
from pier.redact import Redactor
from pier.tasks.model import Task
from pier.tasks.resolve import resolve
from pier.vault import Vault

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunParams:
    """What a caller sends with one run."""

    init_params: dict[str, Any] = field(default_factory=dict)
    secret_params: dict[str, str] = field(default_factory=dict)
    webhook_url: str | None = None
    webhook_secret: str | None = None
    use_trial_keys: bool = False
    subscription_credential: str | None = None


# A subscription credential names the provider whose own API the run uses, with
# the collection's key for it.
SUBSCRIPTION_PROVIDERS = {"anthropic": "anthropic", "codex": "openai"}


@dataclass(frozen=True)
class Payload:
    """Everything needed to start one accepted run; the task is as it was when
    the run was accepted, whatever happens to the stored task later."""

    collection: str
    task_name: str
    task: Task
    run_params: dict[str, Any]
    secret_params: dict[str, str] = field(default_factory=dict, repr=False)
    webhook_url: str | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    use_trial_keys: bool = False

    def stored(self, vault: Vault) -> dict[str, Any]:
        """The storable form: no secret value in clear, secret_params only by name."""
        return {
            "collection": self.collection,
            "task_name": self.task_name,
            "task": self.task.model_dump(mode="json"),
            "run_params": self.run_params,
            "secret_param_names": sorted(self.secret_params),
            "webhook_url": self.webhook_url,
            "webhook_secret": vault.encrypt(self.webhook_secret) if self.webhook_secret else None,
            "use_trial_keys": self.use_trial_keys,
        }

    @classmethod
    def restore(cls, data: dict[str, Any], vault: Vault) -> Payload:
        secret = data.get("webhook_secret")
        return cls(
            collection=data["collection"],
            task_name=data["task_name"],
            task=Task.model_validate(data["task"]),
            run_params=dict(data.get("run_params") or {}),
            webhook_url=data.get("webhook_url"),
            webhook_secret=vault.decrypt(secret) if secret else None,
            use_trial_keys=bool(data.get("use_trial_keys")),
        )


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
    return RunParams(
        init, dict(params.secret_params), url, secret, params.use_trial_keys, params.subscription_credential
    )


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
    def __init__(self, services: Services, vault: Vault, bus: RunBus, webhooks: WebhookSender):
        self.services = services
        self.store = services.store
        self.vault = vault
        self.bus = bus
        self.webhooks = webhooks
        self.executor = InProcessExecutor(self, services.settings.max_concurrent_runs)
        self.trials = Trials(services.store, services.settings)

    # accepting and cancelling (called by routes, in worker threads)

    def accept(
        self, collection: str, task_name: str, params: RunParams, routine_id: int | None = None
    ) -> Trajectory:
        """Check, store and queue a run; InputError (422) when it cannot run.
        `routine_id` names the routine that starts it, if one does."""
        task = Task.model_validate(self.store.get_task(collection, task_name).definition)
        params = with_subscription(split_webhook(params))
        payload = Payload(
            collection, task_name, task, params.init_params, params.secret_params,
            params.webhook_url, params.webhook_secret, params.use_trial_keys,
        )  # fmt: skip
        trajectory_id = uuid.uuid4().hex
        payload, env = self._checked(payload, trajectory_id)
        record = Trajectory.new(
            trajectory_id,
            collection,
            task_name,
            init_params=Redactor(env.values()).data(payload.run_params),
            triggered_by_routine_id=routine_id,
            step_config=task.run_step().model_dump(mode="json"),
            webhook_url=payload.webhook_url,
        )
        self.store.enqueue_run(record, payload.stored(self.vault))
        self.executor.submit(Job(trajectory_id, payload))
        return record

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
        try:
            preflight(self.request(payload, trajectory_id, env), self.services.settings)
        finally:  # copies of stored inputs are made again when the run starts
            shutil.rmtree(self.inputs_dir(trajectory_id), ignore_errors=True)
        return env

    def inputs_dir(self, trajectory_id: str) -> Path:
        """Where a run's inputs are copied from object storage (a local store needs no copy)."""
        return scratch_dir(self.services.settings, trajectory_id) / "inputs"

    def cancel(self, record: Trajectory) -> RunStatus:
        """Cancel a run; its status as the caller should see it now."""
        if record.status.terminal:
            return record.status
        if self.executor.cancel(record.trajectory_id) is not None:
            return RunStatus.cancelled
        # The executor no longer holds it: it has just ended (and saved its end,
        # which the store now shows), or it was never this server's to run.
        current = self.store.get_run(record.trajectory_id)
        if current.status.terminal:
            return current.status
        self.store.save_run(cancelled(current))  # the sweeper removes any sandbox it left
        self.finished(record.trajectory_id, None)
        return RunStatus.cancelled

    # what a run needs to start

    def environment(self, payload: Payload) -> dict[str, str]:
        encrypted = self.store.get_env_encrypted(payload.collection)
        collection_env = {name: self.vault.decrypt(value) for name, value in encrypted.items()}
        if payload.use_trial_keys:  # the collection's own keys win
            collection_env = {**self.trials.keys(), **collection_env}
        step = resolve(payload.task, payload.run_params)
        return sandbox_env(step, collection_env, payload.secret_params)

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
        )

    # RunHooks: the executor calls these from its worker threads

    def context(self, job: Job) -> RunContext:
        payload: Payload = job.payload
        tid = job.trajectory_id
        request = self.request(payload, tid, self.environment(payload))
        observer = Observer(
            on_log=lambda _stage, _line: self.bus.publish(tid), on_step=lambda _s: self.bus.publish(tid)
        )
        return new_context(self.services, request, observer, record=self.store.get_run(tid))

    def ended(self, job: Job, record: Trajectory | None, error: BaseException | None) -> None:
        if record is None:
            message = (
                str(error)
                if isinstance(error, PierError)
                else f"internal error starting the run ({error!r}): see the server log"
            )
            record = failed_to_start(self.store.get_run(job.trajectory_id), message)
            self.store.save_run(record)
        self.finished(job.trajectory_id, job.payload, record)

    def cancelled_before_start(self, job: Job) -> None:
        record = cancelled_waiting(self.store.get_run(job.trajectory_id))
        self.store.save_run(record)
        self.store.append_event(job.trajectory_id, record.error or "cancelled", "prepare")
        self.finished(job.trajectory_id, job.payload, record)

    # the end of a run, and of the server

    def finished(self, trajectory_id: str, payload: Payload | None, record: Trajectory | None = None) -> None:
        """Send the webhook, forget the kept request, wake followers."""
        if payload is None:
            kept = self.store.run_request(trajectory_id)
            payload = Payload.restore(kept, self.vault) if kept else None
        if payload is not None and payload.webhook_url:
            record = record or self.store.get_run(trajectory_id)
            body = record.model_dump_json().encode()
            self.webhooks.send(Delivery(payload.webhook_url, payload.webhook_secret, body, trajectory_id))
        self.store.drop_run_request(trajectory_id)
        shutil.rmtree(self.inputs_dir(trajectory_id), ignore_errors=True)
        self.bus.publish(trajectory_id)

    def stop(self) -> None:
        """Start nothing more. Runs in progress end failed, saying the server
        stopped, and lose their sandboxes; their kept requests stay, so the next
        start sends their webhooks. Pending runs stay pending for that start."""
        self.executor.stop(interrupt=self._interrupt)

    def _interrupt(self, ctx: RunContext) -> None:
        tid = ctx.record.trajectory_id
        try:
            self.store.save_run(interrupted(self.store.get_run(tid)))
            self.store.append_event(tid, SERVER_STOPPED, "save")
        except Exception:
            log.exception("could not record that run %s was interrupted", tid)
        cancel_run(ctx)
        self.bus.publish(tid)
