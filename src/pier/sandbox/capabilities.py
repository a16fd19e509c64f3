"""What a sandbox backend can enforce, and the check every backend runs on a spec
before it creates anything.

Two kinds. A *hard* capability changes what the work can reach or whether it can
run at all: network off, an egress allow-list, a memory ceiling (which is also
how out-of-memory kills are reported), a disk limit (one run filling the host's
disk stops every other run and the database), GPUs. A spec that asks for one the
backend lacks is refused with a CapabilityError naming both. A *soft* capability
is a ceiling that only slows neighbours (CPUs, process count): a backend without
it still creates the sandbox and says so in the sandbox's notes."""

from __future__ import annotations

from pier.errors import CapabilityError
from pier.sandbox.base import Capabilities, Limits, SandboxSpec

__all__ = ["HARD", "SOFT", "Capabilities", "asked", "refuse_unsupported", "unenforced_notes"]

HARD = ("network_off", "egress_allowlist", "memory_limit", "disk_quota", "gpus")
SOFT = ("cpu_limit", "pids_limit")


_WHAT = {
    "network_off": "a sandbox without network",
    "egress_allowlist": "an egress allow-list",
    "memory_limit": "a memory limit",
    "cpu_limit": "a CPU limit",
    "pids_limit": "a process limit",
    "disk_quota": "a disk limit",
    "gpus": "GPUs",
}
_FIX = {
    "network_off": "turn the network on for this step, or use a backend that can turn it off",
    "egress_allowlist": "drop the allow-list, or use a backend that enforces one",
    "memory_limit": "use a backend that enforces memory limits",
    "disk_quota": "use a backend that enforces disk limits, or set PIER_DISK_LIMIT= (empty) to run "
    "without one",
    "gpus": "ask for no GPUs, or use a backend with GPUs",
}


def asked(limits: Limits) -> tuple[str, ...]:
    """The capabilities these limits need. Memory, CPUs and processes always have a
    ceiling; egress only matters while the network is on."""
    wanted = ["memory_limit", "cpu_limit", "pids_limit"]
    if not limits.network:
        wanted.append("network_off")
    elif limits.egress:
        wanted.append("egress_allowlist")
    if limits.disk:
        wanted.append("disk_quota")
    if limits.gpus:
        wanted.append("gpus")
    return tuple(wanted)


def refuse_unsupported(spec: SandboxSpec, capabilities: Capabilities, backend: str) -> None:
    """Raise CapabilityError when spec asks for a hard capability the backend lacks.
    Every backend calls this first thing in create."""
    if spec.volumes and not capabilities.volumes:
        raise CapabilityError(
            f"this sandbox mounts volumes (capability volumes), which the {backend!r} sandbox backend "
            "does not provide: drop `volumes:` from the runbook, or use a backend with volumes "
            "(PIER_SANDBOX_BACKEND=docker)"
        )
    for name in asked(spec.limits):
        if name in HARD and not getattr(capabilities, name):
            raise CapabilityError(
                f"this sandbox asks for {_WHAT[name]} (capability {name}), which the "
                f"{backend!r} sandbox backend does not provide: {_FIX[name]} "
                "(PIER_SANDBOX_BACKEND chooses the backend)"
            )


def unenforced_notes(spec: SandboxSpec, capabilities: Capabilities, backend: str) -> tuple[str, ...]:
    """One note per soft ceiling spec asks for that the backend does not enforce."""
    limits = spec.limits
    value = {"cpu_limit": f"{limits.cpus:g} CPUs", "pids_limit": f"{limits.pids} processes"}
    return tuple(
        f"{value[name]} not enforced: the {backend!r} sandbox backend cannot set {_WHAT[name]} ({name})"
        for name in asked(limits)
        if name in SOFT and not getattr(capabilities, name)
    )
