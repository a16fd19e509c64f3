"""Host services stay out of reach of allow-listed sandboxes: from the internal
network's subnet, this machine accepts only the ports of pier's own services
(the egress proxy and the model gateway) on its address there, and replies.
Without this, anything on the host that listens on 0.0.0.0 (or on the Docker
bridge) would answer a sandbox: an internal network stops forwarding, not
traffic to the host itself.

iptables rules, best effort: pier may run without the right to change them; the
caller then records a warning on the run."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterable

CHAIN = "PIER-EGRESS"
_lock = threading.Lock()


def allow_only(subnet: str, address: str, ports: Iterable[int]) -> str | None:
    """Let traffic from `subnet` to this machine reach only TCP `ports` on `address`
    (and replies). Idempotent; several pier processes add their ports to one
    chain. Returns why it could not, or None."""
    if not shutil.which("iptables"):
        return "iptables is not installed"
    with _lock:
        try:
            _ensure_chain()
            _ensure(["INPUT", "-s", subnet, "-j", CHAIN], insert=True)
            for port in ports:
                _ensure(
                    [CHAIN, "-d", address, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT"], insert=True
                )
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            return f"iptables refused: {str(detail).strip()}"
    return None


def _ensure_chain() -> None:
    if _iptables(["-nL", CHAIN]).returncode != 0:
        _iptables(["-N", CHAIN], check=True)
        _iptables(
            ["-A", CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"], check=True
        )
        _iptables(["-A", CHAIN, "-j", "REJECT", "--reject-with", "icmp-port-unreachable"], check=True)


def _ensure(rule: list[str], insert: bool) -> None:
    chain, spec = rule[0], rule[1:]
    if _iptables(["-C", chain, *spec]).returncode == 0:
        return
    _iptables(["-I", chain, "1", *spec] if insert else ["-A", chain, *spec], check=True)


def _iptables(args: list[str], check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-w", "5", *args], capture_output=True, text=True, check=check, timeout=30
    )
