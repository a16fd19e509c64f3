"""Egress by allow-list: sandboxes on an internal Docker network whose only way
out is pier's CONNECT proxy, which lets a run reach the names it lists.

Names load on first use (PEP 562): a run's plan checks an allow-list without
loading the proxy (its TLS and HTTP libraries)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pier.egress.allow import AllowList, allow_list
    from pier.egress.proxy import EgressGrant, EgressProxy, shared_proxy

_WHERE = {
    "AllowList": "allow",
    "allow_list": "allow",
    "EgressGrant": "proxy",
    "EgressProxy": "proxy",
    "shared_proxy": "proxy",
}
__all__ = ["AllowList", "EgressGrant", "EgressProxy", "allow_list", "shared_proxy"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
