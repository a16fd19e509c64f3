"""pier's model gateway: agents in sandboxes reach their model provider through a
pier-owned endpoint with a per-run token; the real key stays on the host.

Names load on first use (PEP 562): a run's plan needs only `Budget`, and
importing it must not start the HTTP server's dependencies."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pier.gateway.grants import Budget, Grant
    from pier.gateway.routing import ModelRoute, without_provider_keys
    from pier.gateway.server import Gateway, shared_gateway

_WHERE = {
    "Budget": "grants",
    "Grant": "grants",
    "ModelRoute": "routing",
    "without_provider_keys": "routing",
    "Gateway": "server",
    "shared_gateway": "server",
}
__all__ = ["Budget", "Gateway", "Grant", "ModelRoute", "shared_gateway", "without_provider_keys"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
