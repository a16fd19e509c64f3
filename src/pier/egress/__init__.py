"""Egress by allow-list: sandboxes on an internal Docker network whose only way
out is pier's CONNECT proxy, which lets a run reach the names it lists."""

from pier.egress.allow import AllowList, allow_list
from pier.egress.proxy import EgressGrant, EgressProxy, shared_proxy

__all__ = ["AllowList", "EgressGrant", "EgressProxy", "allow_list", "shared_proxy"]
