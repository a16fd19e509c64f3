"""The conformance suite on the fake backend (process mode), and the suite catching
backends that break the contract in one place each."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from pier.sandbox.base import ExecResult
from pier.sandbox.conformance import CHECKS, run_check, run_conformance
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine, FakeSandbox


def fake(backend_class: type[FakeBackend] = FakeBackend) -> FakeBackend:
    return backend_class(engine=FakeEngine(), processes=True)


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_fake_backend_conforms(name):
    result = run_check(name, fake(), FAKE_IMAGE)
    assert result.status == "passed", result.detail


def test_the_suite_returns_one_result_per_check_and_leaves_no_sandbox():
    backend = fake()
    results = run_conformance(backend, FAKE_IMAGE, only=["exec_env", "listing_by_label"])
    assert [(r.name, r.status) for r in results] == [("exec_env", "passed"), ("listing_by_label", "passed")]
    assert backend.list_sandboxes() == []


# --- backends with one defect each -------------------------------------------


class LeakyEnvSandbox(FakeSandbox):
    """clean_env ignored: the spec's env (secrets, in pier) reaches clean shells."""

    def exec(self, command, *, clean_env=False, **kw) -> ExecResult:
        return super().exec(command, **kw)


class LeaderOnlySandbox(FakeSandbox):
    """A time limit that kills the command's process group, not what left it."""

    kill_on_stop = staticmethod(lambda marker, leader: leader and _kill_group(leader))


def _kill_group(leader: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, signal.SIGKILL)


class DeleteOnceBackend(FakeBackend):
    """remove raises for an id it no longer knows: delete is not idempotent."""

    def remove(self, sandbox_id: str) -> None:
        if sandbox_id not in self.engine.sandboxes:
            raise KeyError(sandbox_id)
        super().remove(sandbox_id)


class OverclaimingBackend(FakeBackend):
    """Creates sandboxes without checking capabilities: network-off specs get a network."""

    def create(self, spec):
        self.capabilities, saved = (
            type(self.capabilities)(memory_limit=True, network_off=True, disk_quota=True),
            self.capabilities,
        )
        try:
            return super().create(spec)
        finally:
            self.capabilities = saved


def backend_with(sandbox_class: type[FakeSandbox]) -> FakeBackend:
    backend = fake()
    backend.sandbox_class = sandbox_class
    return backend


def failures(backend: FakeBackend) -> dict[str, str]:
    try:
        return {r.name: r.detail for r in run_conformance(backend, FAKE_IMAGE) if r.status == "failed"}
    finally:
        for leftover in list(backend.engine.sandboxes.values()):
            leftover.stop()


def test_a_leaky_clean_env_is_caught():
    assert failures(backend_with(LeakyEnvSandbox)) == {"exec_clean_env": "clean_env kept the spec's env"}


def test_a_time_limit_that_spares_children_is_caught():
    found = failures(backend_with(LeaderOnlySandbox))
    assert list(found) == ["timeout_kills_children"]
    assert "processes survived the timeout" in found["timeout_kills_children"]


def test_a_delete_that_is_not_idempotent_is_caught():
    found = failures(fake(DeleteOnceBackend))
    assert list(found) == ["delete_is_idempotent_and_bounded"]
    assert "KeyError" in found["delete_is_idempotent_and_bounded"]


class WarnOnlyDiskBackend(FakeBackend):
    """Creates a sandbox with a disk limit it does not enforce, and only says so."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.capabilities = type(self.capabilities)(memory_limit=True)

    def create(self, spec):
        from dataclasses import replace

        sandbox = super().create(replace(spec, limits=replace(spec.limits, disk=None)))
        sandbox.notes = (*sandbox.notes, f"disk limit {spec.limits.disk} not enforced")
        return sandbox


def test_a_backend_that_only_warns_about_the_disk_limit_is_caught():
    found = failures(fake(WarnOnlyDiskBackend))
    assert list(found) == ["capability_disk_quota"]
    assert "not refused" in found["capability_disk_quota"]


class OverflowingSandbox(FakeSandbox):
    """A disk limit that is never reported reached (writes past it go on)."""

    def limit_reached(self):
        return None


def test_a_disk_limit_that_does_not_hold_is_caught():
    found = failures(backend_with(OverflowingSandbox))
    assert list(found) == ["capability_disk_quota"]


def test_a_backend_that_ignores_an_unsupported_capability_is_caught():
    found = failures(fake(OverclaimingBackend))
    assert found == {
        "capability_network_off": "undeclared network_off: a spec needing it was created, not refused"
    }
