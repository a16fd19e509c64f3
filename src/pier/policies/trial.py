"""Trial keys: provider keys the operator shares (PIER_TRIAL_KEYS) for a few
runs per collection (PIER_TRIAL_RUNS), for callers who have no key yet. A run
asks for them with `use_trial_keys`; once a collection activated its trial, a
run that could not start without them gets them too. They fill only the
variables the collection does not set; each such run counts against the budget."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pier.db import Store
from pier.errors import InputError
from pier.settings import Settings

NO_TRIAL = (
    "this server has no trial keys: its operator can set PIER_TRIAL_KEYS (JSON, variable -> key) and "
    "PIER_TRIAL_RUNS; meanwhile set your own provider key with PATCH /api/v1/collections/{c}/environment"
)


class TrialStatus(BaseModel):
    collection: str
    available: bool = Field(description="the server has trial keys")
    active: bool = Field(description="the collection activated its trial")
    providers: list[str] = Field(description="the variables the trial keys set")
    runs_limit: int
    runs_used: int
    runs_remaining: int
    message: str


class Trials:
    def __init__(self, store: Store, settings: Settings):
        self.store = store
        self.settings = settings

    @property
    def available(self) -> bool:
        return bool(self.settings.trial_keys) and self.settings.trial_runs > 0

    def keys(self) -> dict[str, str]:
        return {name: key.get_secret_value() for name, key in self.settings.trial_keys.items()}

    def status(self, collection: str) -> TrialStatus:
        activated, used = self.store.trial(collection)
        limit = self.settings.trial_runs if self.available else 0
        remaining = max(limit - used, 0)
        if not self.available:
            message = NO_TRIAL.replace("{c}", collection)
        elif remaining == 0:
            message = f"the trial's {limit} runs are used: set your own provider key in the collection's environment"
        else:
            message = f"{remaining} trial run(s) left: send use_trial_keys with a run"
        return TrialStatus(
            collection=collection,
            available=self.available,
            active=activated is not None,
            providers=sorted(self.settings.trial_keys) if self.available else [],
            runs_limit=limit,
            runs_used=used,
            runs_remaining=remaining,
            message=message,
        )

    def activate(self, collection: str) -> TrialStatus:
        if not self.available:
            raise InputError(NO_TRIAL.replace("{c}", collection))
        self.store.activate_trial(collection)
        return self.status(collection)

    def eligible(self, collection: str) -> bool:
        """Trial keys go to this collection's runs without asking: it activated
        the trial and has runs left."""
        status = self.status(collection)
        return status.active and status.runs_remaining > 0

    def require(self, collection: str) -> None:
        """InputError unless a trial run is possible now."""
        if not self.available:
            raise InputError("use_trial_keys: " + NO_TRIAL.replace("{c}", collection))
        if self.status(collection).runs_remaining == 0:
            raise InputError(f"use_trial_keys: {self.status(collection).message}")

    def take(self, collection: str) -> None:
        if not self.store.take_trial_run(collection, self.settings.trial_runs):
            raise InputError(f"use_trial_keys: {self.status(collection).message}")
