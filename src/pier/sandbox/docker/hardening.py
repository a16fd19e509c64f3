"""The hardened default sandbox: which kernel privileges a sandbox keeps, and which
runtime runs it. Pure: settings and engine facts in, create arguments out.

The agent runs as root (runbooks `apt-get install` what they need), so the
hardening is in what that root may do, not in a lesser user:

- Every capability is dropped, then the few that a root package manager and a
  build need are added back (KEEP_CAPS). Gone: NET_RAW (forged packets, ARP
  spoofing on the bridge), MKNOD (device nodes), SETFCAP/SETPCAP (granting
  capabilities), SYS_CHROOT, AUDIT_WRITE. PIER_SANDBOX_CAP_ADD adds any back.
- no-new-privileges: no setuid binary or file capability raises a process's
  privileges (PIER_SANDBOX_NO_NEW_PRIVILEGES=false relaxes it).
- The engine's default seccomp profile stays: pier never asks for unconfined.
- A private IPC namespace: nothing is shared with other containers.
- PIER_SANDBOX_RUNTIME names the OCI runtime (gVisor `runsc`, Kata, Sysbox, or
  `runc`) that the engine has registered; `auto`, the default, takes the first
  of the stronger ones the engine has (runsc first), else its default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pier.errors import SandboxError

# What apt-get/dpkg as root and ordinary builds use: apt drops to the _apt user
# (SETUID, SETGID) and chowns its download folder to it (CHOWN); root reads and
# changes files other users own (DAC_OVERRIDE, FOWNER); unpacking keeps setuid
# bits (FSETID); root signals processes of other users, such as _apt's (KILL);
# a dev server may bind port 80 (NET_BIND_SERVICE).
KEEP_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETGID", "SETUID")
# Stronger runtimes, strongest isolation first, under the names engines register them.
STRONG_RUNTIMES = ("runsc", "kata", "kata-runtime", "kata-qemu", "sysbox-runc")
AUTO = "auto"
RUNC = "runc"  # Docker's built-in runtime: the explicit choice of no stronger one


@dataclass(frozen=True)
class Hardening:
    cap_add: tuple[str, ...] = KEEP_CAPS
    no_new_privileges: bool = True
    runtime: str | None = None  # None: the engine's default (runc)

    def host_config(self) -> dict[str, Any]:
        """APIClient.create_host_config arguments."""
        host: dict[str, Any] = {
            "cap_drop": ["ALL"],
            "cap_add": list(self.cap_add),
            "ipc_mode": "private",
        }
        if self.no_new_privileges:
            host["security_opt"] = ["no-new-privileges:true"]
        if self.runtime:
            host["runtime"] = self.runtime
        return host


def hardening(
    extra_caps: Iterable[str], no_new_privileges: bool, runtime: str | None, engine_runtimes: Iterable[str]
) -> Hardening:
    """The hardening for these settings on an engine that has engine_runtimes.
    Raises SandboxError when the runtime asked for is not registered there."""
    caps = tuple(dict.fromkeys([*KEEP_CAPS, *(_cap_name(c) for c in extra_caps)]))
    return Hardening(caps, no_new_privileges, _runtime(runtime, set(engine_runtimes)))


def _cap_name(cap: str) -> str:
    """NET_RAW, net_raw and CAP_NET_RAW all name the same capability."""
    return cap.strip().upper().removeprefix("CAP_")


def runtime_reason(wanted: str | None, chosen: str | None, default: str, available: Iterable[str]) -> str:
    """One sentence: which runtime sandboxes get and why, for the CLI's and the
    server's first lines."""
    name = chosen or default
    if not wanted:
        return f"sandboxes run under {name} (PIER_SANDBOX_RUNTIME is empty: the engine's default)"
    if wanted != AUTO:
        return f"sandboxes run under {name} (PIER_SANDBOX_RUNTIME={wanted})"
    if chosen:
        return f"sandboxes run under {name} (PIER_SANDBOX_RUNTIME=auto: the strongest runtime the engine has)"
    have = ", ".join(sorted(available)) or "none"
    return (
        f"sandboxes run under {name}, the engine's default (PIER_SANDBOX_RUNTIME=auto, and the engine has "
        f"no runsc, kata or sysbox-runc registered; it has: {have}): docs/runtime.md says how to add runsc"
    )


def _runtime(wanted: str | None, available: set[str]) -> str | None:
    if not wanted:
        return None
    if wanted == AUTO:
        return next((name for name in STRONG_RUNTIMES if name in available), None)
    if wanted == RUNC and not available:  # an engine that lists none still has its built-in runc
        return RUNC
    if wanted not in available:
        have = ", ".join(sorted(available)) or "none"
        raise SandboxError(
            f"PIER_SANDBOX_RUNTIME={wanted} but the Docker engine has no runtime of that name "
            f"(it has: {have}): install and register it in the engine's daemon.json, or set "
            f"PIER_SANDBOX_RUNTIME={AUTO} to use the strongest one present, or unset it"
        )
    return wanted
