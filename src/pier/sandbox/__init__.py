"""Sandboxes: the backend contract, where a sandbox comes from (source, Dockerfile,
snapshots), the Docker backend and the sweeper."""

from __future__ import annotations

from pier.sandbox.base import SandboxBackend
from pier.sandbox.creation import create_with_retry
from pier.sandbox.source import resolve_source
from pier.settings import Settings, get_settings

__all__ = ["create_with_retry", "get_backend", "resolve_source"]


def get_backend(settings: Settings | None = None) -> SandboxBackend:
    """The sandbox backend for these settings (Docker, the only one today). Does not
    connect yet: the first call that needs the engine does, or ping()."""
    from pier.sandbox.docker.backend import DockerBackend  # the SDK loads only when used

    return DockerBackend(settings or get_settings())
