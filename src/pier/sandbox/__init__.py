"""Sandboxes: the backend contract, where a sandbox comes from (source, Dockerfile,
snapshots), the backends (Docker, and an in-process fake for tests), the
conformance suite every backend passes, and the sweeper."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pier.errors import InputError

if TYPE_CHECKING:
    from pier.sandbox.base import SandboxBackend
    from pier.sandbox.creation import create_with_retry
    from pier.sandbox.source import resolve_source
    from pier.settings import Settings

__all__ = ["backend_names", "create_with_retry", "get_backend", "register_backend", "resolve_source"]

BackendFactory = Callable[["Settings"], "SandboxBackend"]
# Loaded on first use (PEP 562): the contract (pier.sandbox.base) is imported by
# commands that only read, without the snapshot catalogue's YAML and models.
_WHERE = {"create_with_retry": "creation", "resolve_source": "source"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


ENTRY_POINT_GROUP = "pier.sandbox_backends"

# Built-in backends by name, as "module:factory": a backend's module (and its
# vendor SDK) is imported only when it is chosen.
_BUILTIN = {
    "docker": "pier.sandbox.docker.backend:DockerBackend",
    "fake": "pier.sandbox.fake:FakeBackend",
    "fake-rated": "pier.sandbox.fake:rated_backend",
}
_registered: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make a backend choosable as PIER_SANDBOX_BACKEND=name in this process.
    Packages can do the same for every process with an entry point in the
    `pier.sandbox_backends` group."""
    _registered[name] = factory


def backend_names() -> list[str]:
    """Every backend name PIER_SANDBOX_BACKEND accepts here (besides module:factory)."""
    from importlib.metadata import entry_points

    plugins = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted({*_BUILTIN, *_registered, *plugins})


def get_backend(settings: Settings) -> SandboxBackend:
    """The sandbox backend PIER_SANDBOX_BACKEND names (default docker). Does not
    connect yet: the first call that needs the engine does, or ping(). Raises
    InputError for a name no backend answers to."""
    return _factory(settings.sandbox_backend)(settings)


def _factory(name: str) -> BackendFactory:
    if name in _registered:
        return _registered[name]
    target = _BUILTIN.get(name)
    if target is None:
        from importlib.metadata import entry_points

        target = next((ep.value for ep in entry_points(group=ENTRY_POINT_GROUP, name=name)), None)
    if target is None and ":" in name:
        target = name
    if target is None:
        raise InputError(
            f"PIER_SANDBOX_BACKEND={name!r} names no sandbox backend: use one of "
            f"{', '.join(backend_names())}, or module:factory for your own"
        )
    return _load(target, name)


def _load(target: str, name: str) -> BackendFactory:
    module_name, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(
            f"PIER_SANDBOX_BACKEND={name!r}: cannot load {target} ({exc}): check the module "
            "is installed and the factory name is right"
        ) from exc
    return factory  # type: ignore[no-any-return]
