"""pier's model gateway: agents in sandboxes reach their model provider through a
pier-owned endpoint with a per-run token; the real key stays on the host."""

from pier.gateway.grants import Budget, Grant
from pier.gateway.routing import ModelRoute, without_provider_keys
from pier.gateway.server import Gateway, shared_gateway

__all__ = ["Budget", "Gateway", "Grant", "ModelRoute", "shared_gateway", "without_provider_keys"]
