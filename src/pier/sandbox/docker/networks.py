"""The internal network allow-listed sandboxes join: no route out (Docker's
`internal`), so their only way out is what pier serves on the network's gateway
address (the egress proxy and the model gateway)."""

from __future__ import annotations

import docker
import docker.errors

from pier.errors import SandboxError
from pier.sandbox.base import LABEL_OWNER, InternalNetwork
from pier.sandbox.docker.client import bridge_address

BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"


def ensure_internal_network(api: docker.APIClient, name: str, owner: str) -> InternalNetwork:
    """The gateway address of the internal network `name`, created if missing (a
    concurrent creator is fine). Raises SandboxError when a network of that name
    exists but is not internal: it would let sandboxes out."""
    try:
        network = api.inspect_network(name)
    except docker.errors.NotFound:
        try:
            api.create_network(
                name, driver="bridge", internal=True, labels={"pier.network": "egress", LABEL_OWNER: owner},
                options={BRIDGE_NAME_OPTION: name[:15]}, check_duplicate=True,
            )  # fmt: skip
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
        network = api.inspect_network(name)
    if not network.get("Internal"):
        raise SandboxError(
            f"Docker network {name} exists but is not internal, so its sandboxes could reach anything: "
            f"remove it (`docker network rm {name}`) or set PIER_EGRESS_NETWORK to another name"
        )
    address = bridge_address(network)
    subnet = (((network.get("IPAM") or {}).get("Config") or [{}])[0]).get("Subnet")
    if not address or not subnet:
        raise SandboxError(
            f"Docker network {name} has no subnet or gateway: remove it and let pier recreate it"
        )
    return InternalNetwork(name, address, subnet)
