"""A run as an executor is handed it: what was accepted (Payload, in memory,
secret values in clear for the one process that holds it) and its serializable
form (RunSpec), which crosses process boundaries (a workflow's input) with no
secret value in clear: secret_params and the webhook secret are sealed with the
vault key, collection secrets are not in it at all (the worker reads them from
the store), input files are named by their storage paths."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from pier.tasks.model import Task
from pier.vault import Vault


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


class RunSpec(BaseModel):
    """One run, serializable: ids, task, parameters, sealed secrets, file
    references (paths in run_params). Open it with the same vault key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trajectory_id: str
    collection: str
    task_name: str
    task: dict[str, Any]
    run_params: dict[str, Any]
    sealed_secret_params: dict[str, str] = {}
    webhook_url: str | None = None
    sealed_webhook_secret: str | None = None
    use_trial_keys: bool = False

    @classmethod
    def seal(cls, trajectory_id: str, payload: Payload, vault: Vault) -> RunSpec:
        return cls(
            trajectory_id=trajectory_id,
            collection=payload.collection,
            task_name=payload.task_name,
            task=payload.task.model_dump(mode="json"),
            run_params=payload.run_params,
            sealed_secret_params={k: vault.encrypt(v) for k, v in payload.secret_params.items()},
            webhook_url=payload.webhook_url,
            sealed_webhook_secret=vault.encrypt(payload.webhook_secret) if payload.webhook_secret else None,
            use_trial_keys=payload.use_trial_keys,
        )

    def open(self, vault: Vault) -> Payload:
        """The payload with its secrets in clear (VaultError with another key)."""
        secret = self.sealed_webhook_secret
        return Payload(
            collection=self.collection,
            task_name=self.task_name,
            task=Task.model_validate(self.task),
            run_params=dict(self.run_params),
            secret_params={k: vault.decrypt(v) for k, v in self.sealed_secret_params.items()},
            webhook_url=self.webhook_url,
            webhook_secret=vault.decrypt(secret) if secret else None,
            use_trial_keys=self.use_trial_keys,
        )
