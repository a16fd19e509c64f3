"""An experiment's runs on the server: each accepted by the dispatcher like any
API run (checked, stored pending with its labels, queued on the executor), each
cancelled the way a run's cancel route does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pier.errors import NotFoundError
from pier.experiments.service import Experiments
from pier.record import Label
from pier.sandbox.owner import owner_label
from pier.server.dispatcher import Dispatcher, RunParams
from pier.settings import Settings
from pier.tasks.model import Task

# What the caller gives a run of a task with these init_params (its keys), sent
# as the run's secret_params: `pier experiment run` gives its caller's
# environment the way `pier run` does.
CallerSecrets = Callable[[Task, Mapping[str, Any]], dict[str, str]]


class DispatcherStarter:
    def __init__(self, dispatcher: Dispatcher, secrets: CallerSecrets | None = None):
        self.dispatcher = dispatcher
        self.secrets = secrets

    def _params(self, task: Task, init_params: dict[str, Any]) -> RunParams:
        secrets = self.secrets(task, init_params) if self.secrets is not None else {}
        return RunParams(init_params, secret_params=secrets)

    def preflight(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any]) -> None:
        self.dispatcher.check_task(collection, task_name, task, self._params(task, init_params))

    def start(self, collection: str, task_name: str, task: Task, init_params: dict[str, Any],
              trajectory_id: str, labels: Sequence[Label]) -> None:  # fmt: skip
        self.dispatcher.accept_task(
            collection, task_name, task, self._params(task, init_params), trajectory_id=trajectory_id,
            labels=labels,
        )  # fmt: skip

    def cancel(self, trajectory_id: str) -> None:
        try:
            record = self.dispatcher.store.get_run(trajectory_id)
        except NotFoundError:
            return
        self.dispatcher.cancel(record)


def experiments(dispatcher: Dispatcher, settings: Settings) -> Experiments:
    return Experiments(
        dispatcher.store, DispatcherStarter(dispatcher), max_runs=settings.experiment_max_runs,
        lease_sec=settings.experiment_lease_sec, owner=owner_label(),
    )  # fmt: skip
