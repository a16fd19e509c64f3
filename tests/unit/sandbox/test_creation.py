from __future__ import annotations

import pytest

from pier.errors import CapabilityError, ImageError, InputError, SandboxError
from pier.sandbox import create_with_retry
from pier.sandbox.base import Limits, SandboxSource, SandboxSpec
from pier.sandbox.dockerfile import recipe_tag
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine

SPEC = SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels={"pier.run": "r"})
SOURCE = SandboxSource(kind="dockerfile", name="generated", dockerfile="FROM x\n")


class FlakyBackend(FakeBackend):
    """The shared fake backend, failing its first creates with the given errors."""

    def __init__(self, failures: list[Exception]):
        super().__init__(engine=FakeEngine())
        self.failures = failures
        self.created: list[SandboxSpec] = []
        self.timeouts: list[float] = []

    def ensure_image(self, source, log, timeout):
        self.timeouts.append(timeout)
        return super().ensure_image(source, log, timeout)

    def create(self, spec):
        self.created.append(spec)
        if self.failures:
            raise self.failures.pop(0)
        return super().create(spec)


def test_a_failed_creation_is_retried_once():
    backend = FlakyBackend([SandboxError("engine hiccup")])
    lines: list[str] = []
    sandbox = create_with_retry(backend, SPEC, 60, on_line=lines.append)
    assert [s.id for s in backend.list_sandboxes()] == [sandbox.id]
    assert len(backend.created) == 2
    assert lines and "retrying once" in lines[0] and "engine hiccup" in lines[0]


def test_the_second_failure_is_raised():
    backend = FlakyBackend([ImageError("first"), ImageError("second")])
    with pytest.raises(ImageError, match="second"):
        create_with_retry(backend, SPEC, 60)
    assert len(backend.created) == 2


def test_no_retry_without_time_left_or_for_bad_input():
    with pytest.raises(SandboxError):
        create_with_retry(FlakyBackend([SandboxError("x"), SandboxError("y")]), SPEC, 1)
    backend = FlakyBackend([InputError("bad memory size")])
    with pytest.raises(InputError):
        create_with_retry(backend, SPEC, 60)
    assert len(backend.created) == 1


def test_with_a_source_each_attempt_gets_the_image_within_the_budget():
    backend = FlakyBackend([SandboxError("x")])
    sandbox = create_with_retry(backend, SPEC, 60, source=SOURCE)
    built = recipe_tag(SOURCE.name, SOURCE.dockerfile or "", None)
    assert [spec.image for spec in backend.created] == [built, built] and sandbox.spec.image == built
    assert all(0 < timeout <= 60 for timeout in backend.timeouts) and len(backend.timeouts) == 2


def test_a_capability_refusal_is_not_retried():
    backend = FlakyBackend([CapabilityError("no network_off"), SandboxError("never reached")])
    with pytest.raises(CapabilityError, match="network_off"):
        create_with_retry(backend, SPEC, 60)
    assert len(backend.created) == 1
