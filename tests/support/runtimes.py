"""The OCI runtimes the isolation-relevant integration tests run on: the engine's
default (runc) and gVisor (runsc). A runtime the engine has not registered skips
them, and fails them under CI (which registers runsc, see .ci/run)."""

from __future__ import annotations

SANDBOX_RUNTIMES = ("runc", "runsc")


def runtime_setting(name: str) -> str:
    """PIER_SANDBOX_RUNTIME for a runtime's name (runc is named too: the default is auto)."""
    return name
