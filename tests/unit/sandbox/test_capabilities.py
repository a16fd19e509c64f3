"""A spec is refused before create when it needs a hard capability the backend
lacks, and noted when a soft ceiling cannot be enforced."""

from __future__ import annotations

import pytest

from pier.errors import CapabilityError
from pier.sandbox.base import Capabilities, Limits, SandboxSpec
from pier.sandbox.capabilities import asked, refuse_unsupported, unenforced_notes

EVERYTHING = Capabilities(**dict.fromkeys(Capabilities.__dataclass_fields__, True))


def spec(**limits: object) -> SandboxSpec:
    return SandboxSpec(image="i", limits=Limits(**limits), labels={})  # type: ignore[arg-type]


def test_what_limits_ask_for():
    assert asked(Limits(disk=None)) == ("memory_limit", "cpu_limit", "pids_limit")
    assert "network_off" in asked(Limits(network=False, egress=("x",)))
    assert "egress_allowlist" not in asked(Limits(network=False, egress=("x",)))
    assert "egress_allowlist" in asked(Limits(egress=("pypi.org",)))
    assert {"disk_quota", "gpus"} <= set(asked(Limits(disk="1G", gpus=2)))


@pytest.mark.parametrize(
    ("limits", "capability"),
    [
        ({"network": False}, "network_off"),
        ({"egress": ("pypi.org",)}, "egress_allowlist"),
        ({"gpus": 1}, "gpus"),
        ({}, "memory_limit"),
        ({"disk": "5G"}, "disk_quota"),  # only warning about it let one run fill the host's disk
    ],
)
def test_a_missing_hard_capability_is_refused_naming_it_and_the_backend(limits, capability):
    lacking = Capabilities(**{**dict.fromkeys(Capabilities.__dataclass_fields__, True), capability: False})
    with pytest.raises(CapabilityError, match=rf"\(capability {capability}\).*'k8s' sandbox backend"):
        refuse_unsupported(spec(**limits), lacking, "k8s")
    refuse_unsupported(spec(**limits), EVERYTHING, "k8s")


def test_missing_soft_capabilities_become_notes():
    notes = unenforced_notes(spec(cpus=2, pids=64, disk=None), Capabilities(memory_limit=True), "fake")
    assert notes == (
        "2 CPUs not enforced: the 'fake' sandbox backend cannot set a CPU limit (cpu_limit)",
        "64 processes not enforced: the 'fake' sandbox backend cannot set a process limit (pids_limit)",
    )
    assert unenforced_notes(spec(pids=64), EVERYTHING, "fake") == ()
    refuse_unsupported(spec(pids=64, disk=None), Capabilities(memory_limit=True), "fake")  # soft: no refusal


def test_declared_lists_what_is_true():
    assert Capabilities(network_off=True, gpus=True).declared() == ("network_off", "gpus")
