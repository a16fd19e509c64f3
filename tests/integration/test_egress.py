"""Egress by allow-list, asserted from inside the sandbox: with `network.allow`, a
listed host answers through pier's proxy; an unlisted host, a direct IP, another
port, DNS and the host's other services do not get out."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.sandbox.docker.fence import withdraw
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

LISTED = "pypi.org"


@pytest.fixture(autouse=True)
def listed_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where pypi.org resolves to a non-public address (a machine whose resolver
    answers with its proxy's), the operator opts it in, as an operator would."""
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", LISTED)
    get_settings.cache_clear()


PROBES = r"""
```bash
set +e
out={{results_dir}}
probe() {  # name, command: its output and exit code into results/<name>.txt
  name=$1; shift
  { "$@"; echo "exit=$?"; } > "$out/$name.txt" 2>&1
}
probe listed curl -sS -m 30 -o /dev/null -w '%{http_code}\n' https://LISTED/simple/six/
probe unlisted python3 -c "import urllib.request; urllib.request.urlopen('https://example.org/', timeout=30)"
probe other_port curl -sS -m 30 https://LISTED:8443/
probe ip_via_proxy curl -sS -m 30 -k https://PUBLIC_IP/
probe ip_direct curl -sS -m 10 --noproxy '*' -k https://PUBLIC_IP/
probe dns getent hosts LISTED
probe dns_tunnel python3 -c "import socket; socket.getaddrinfo('pier-tunnel-4f2a.example.com', 443)"
probe host_service curl -sS -m 10 --noproxy '*' http://HOST_SERVICE/
probe bridge_service curl -sS -m 10 --noproxy '*' http://BRIDGE_SERVICE/
probe bridge_via_proxy curl -sS -m 10 https://BRIDGE_SERVICE/
env | grep -i _proxy | sed 's/pier-egress-[^@]*/TOKEN/' > "$out/env.txt"
```
"""


class Hello(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")


@pytest.fixture
def host_service(docker_backend) -> Iterator[str]:
    """A service on this machine's address on the egress network: what a service
    listening on 0.0.0.0 would offer a sandbox there."""
    address = docker_backend.ensure_internal_network(get_settings().egress_network).address
    server = socketserver.ThreadingTCPServer((address, 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"{address}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def start(front: dict, body: str, image: str) -> Trajectory:
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    text = "---\n" + "\n".join(lines) + "\n---\n# Egress\n" + body
    request = RunRequest(collection="egress", task_name="egress", task=task_from_runbook(parse(text)),
                         run_params={"snapshot": "", "image": image})  # fmt: skip
    return run(Services(get_settings()), request)


def outputs(record: Trajectory) -> dict[str, str]:
    results = run_folder(record) / "results"
    return {f.stem: f.read_text() for f in results.glob("*.txt")}


def test_only_listed_hosts_get_out(base_image, host_service, model_server, on_runtime):
    public_ip = socket.getaddrinfo(LISTED, 443, type=socket.SOCK_STREAM)[0][4][0]
    bridge = model_server.url.removeprefix("http://")
    body = (PROBES.replace("LISTED", LISTED).replace("PUBLIC_IP", public_ip)
            .replace("HOST_SERVICE", host_service).replace("BRIDGE_SERVICE", bridge))  # fmt: skip

    record = start({"agent": "script", "network": {"allow": [LISTED]}}, body, base_image)

    assert record.status.value == "completed", record.error
    seen = outputs(record)
    assert seen["listed"].splitlines() == ["200", "exit=0"], seen["listed"]
    assert (
        "403 pier's egress allow-list refused example.org: add it to network.allow (this run allows pypi.org)"
        in seen["unlisted"]
    )
    assert "403" in seen["other_port"] and not seen["other_port"].endswith("exit=0\n")
    assert "403" in seen["ip_via_proxy"] and not seen["ip_via_proxy"].endswith("exit=0\n")
    for name in ("ip_direct", "dns", "dns_tunnel", "host_service", "bridge_service", "bridge_via_proxy"):
        assert not seen[name].endswith("exit=0\n"), (name, seen[name])
    assert "hello" not in seen["host_service"] + seen["bridge_service"]
    assert "HTTPS_PROXY=http://pier:TOKEN@" in seen["env"]
    log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    assert any(line.startswith("egress: only through pier's proxy, to pypi.org") for line in log)
    assert any(line.startswith("egress refused") and "example.org (1)" in line for line in log)
    assert not [
        w for w in record.outputs.warnings if "services on this machine" in w
    ]  # the firewall rule went in


def test_without_an_allow_list_egress_is_as_before(base_image, model_server, monkeypatch):
    """No proxy in the way; a host service answers once the operator names it
    (PIER_SANDBOX_HOST_ALLOW: the host is fenced off a sandbox otherwise)."""
    bridge = model_server.url.removeprefix("http://")
    monkeypatch.setenv("PIER_SANDBOX_HOST_ALLOW", bridge)
    get_settings.cache_clear()
    body = "```bash\ncurl -sS -m 10 http://BRIDGE/v1/models > {{results_dir}}/bridge.txt\nenv > {{results_dir}}/env.txt\n```\n"
    record = start({"agent": "script"}, body.replace("BRIDGE", bridge), base_image)
    assert record.status.value == "completed", record.error
    host, port = bridge.split(":")
    withdraw(host, int(port))  # the service was named for this test only
    assert '"object": "list"' in outputs(record)["bridge"]
    assert "HTTPS_PROXY" not in outputs(record)["env"]


def test_network_disabled_still_means_none_with_an_allow_list(base_image):
    body = "```bash\nls /sys/class/net > {{results_dir}}/nets.txt\n```\n"
    record = start(
        {"agent": "script", "network_enabled": False, "network": {"allow": [LISTED]}}, body, base_image
    )
    assert record.status.value == "completed", record.error
    assert outputs(record)["nets"].split() == ["lo"]
