"""The Docker networks pier's sandboxes join, both bridges with inter-container
traffic off (`enable_icc=false`: a sandbox never reaches another on it), both
fenced off the host by pier.sandbox.docker.fence:

- the sandbox network (PIER_SANDBOX_NETWORK): sandboxes with network on and no
  allow-list; a route out through the engine's NAT, as on the default bridge;
- the egress network (PIER_EGRESS_NETWORK): internal (no route out), so an
  allow-listed sandbox's only way out is what pier serves on the network's
  gateway address (the egress proxy and the model gateway)."""

from __future__ import annotations

from typing import Any

import docker
import docker.errors

from pier.errors import SandboxError
from pier.sandbox.base import LABEL_OWNER, InternalNetwork
from pier.sandbox.docker.client import bridge_address

BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
ICC_OPTION = "com.docker.network.bridge.enable_icc"
IFNAME_MAX = 15  # Linux interface names


def ensure_internal_network(api: docker.APIClient, name: str, owner: str) -> InternalNetwork:
    """The internal network `name`, created if missing (a concurrent creator is
    fine). Raises SandboxError when a network of that name exists but is not
    internal: it would let sandboxes out."""
    network = _ensure(api, name, owner, internal=True, role="egress")
    if not network.get("Internal"):
        raise SandboxError(
            f"Docker network {name} exists but is not internal, so its sandboxes could reach anything: "
            f"remove it (`docker network rm {name}`) or set PIER_EGRESS_NETWORK to another name"
        )
    return _described(network)


def ensure_sandbox_network(api: docker.APIClient, name: str, owner: str) -> InternalNetwork:
    """The sandbox network `name`, created if missing. Raises SandboxError when a
    network of that name exists but is internal (its sandboxes would have no
    network) or is not a bridge (pier could not fence it)."""
    network = _ensure(api, name, owner, internal=False, role="sandbox")
    if network.get("Internal") or network.get("Driver") != "bridge":
        raise SandboxError(
            f"Docker network {name} exists but is not a plain bridge network, so pier cannot use it for "
            f"sandboxes: remove it (`docker network rm {name}`) or set PIER_SANDBOX_NETWORK to another name"
        )
    return _described(network)


def _ensure(api: docker.APIClient, name: str, owner: str, internal: bool, role: str) -> dict[str, Any]:
    try:
        return dict(api.inspect_network(name))
    except docker.errors.NotFound:
        pass
    try:
        api.create_network(
            name, driver="bridge", internal=internal, labels={"pier.network": role, LABEL_OWNER: owner},
            options={BRIDGE_NAME_OPTION: name[:IFNAME_MAX], ICC_OPTION: "false"}, check_duplicate=True,
        )  # fmt: skip
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    return dict(api.inspect_network(name))


def _described(network: dict[str, Any]) -> InternalNetwork:
    name = str(network.get("Name"))
    address = bridge_address(network)
    subnet = (((network.get("IPAM") or {}).get("Config") or [{}])[0]).get("Subnet")
    if not address or not subnet:
        raise SandboxError(
            f"Docker network {name} has no subnet or gateway: remove it and let pier recreate it"
        )
    return InternalNetwork(name, address, subnet, interface=bridge_interface(network))


def bridge_interface(network: dict[str, Any]) -> str:
    """The host interface of a bridge network: the name its options give, else the
    engine's own naming (br- and the id's first 12 characters)."""
    named = (network.get("Options") or {}).get(BRIDGE_NAME_OPTION)
    return str(named) if named else f"br-{str(network.get('Id', ''))[:12]}"
