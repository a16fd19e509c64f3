"""No sandbox reaches another sandbox or this machine's services, asserted from
where the attacker stands: inside a sandbox, in every network mode, on runc and
on gVisor (runsc). Run A (one collection) serves HTTP in its sandbox; run B
(another collection), at the same time, tries A by address, by container name
and through pier's egress proxy, and tries listeners this test holds on the
host (loopback, 0.0.0.0, the bridge gateways, the host's other addresses),
which count every connection they accept. Only the one the operator opted in
(PIER_SANDBOX_HOST_ALLOW) may answer."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from tests.support.model_server import bridge_gateway
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.sandbox.base import LABEL_COLLECTION
from pier.sandbox.docker.fence import withdraw
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

PORT_IN_A = 8080
WAIT_S = 120

LISTENER = rf"""
```bash
cd /tmp && nohup python3 -m http.server {PORT_IN_A} --bind 0.0.0.0 >/dev/null 2>&1 &
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:{PORT_IN_A}/ && break; sleep 0.1; done
curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{PORT_IN_A}/ > {{{{results_dir}}}}/self.txt
touch /tmp/ready
for i in $(seq {WAIT_S * 10}); do [ -f /tmp/stop ] && break; sleep 0.1; done
```
"""

# One TCP connection per target: what answered, or why it could not connect.
PROBE = r"""
```bash
cat > /tmp/probe.py <<'PY'
import json, socket, sys
out = {}
for name, (host, port) in json.loads(sys.argv[1]).items():
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            out[name] = "answered: " + conn.recv(200).decode(errors="replace")
    except OSError as exc:
        out[name] = "refused: " + str(exc)
print(json.dumps(out))
PY
python3 /tmp/probe.py 'TARGETS' > {{results_dir}}/probes.json
if [ -n "${HTTPS_PROXY:-}" ]; then
  for target in A_ADDRESS A_NAME; do
    curl -sS -m 10 -p -x "$HTTPS_PROXY" http://$target:PORT/ > {{results_dir}}/proxy-$target.txt 2>&1 \
      && echo "exit=0" >> {{results_dir}}/proxy-$target.txt || echo "exit=$?" >> {{results_dir}}/proxy-$target.txt
  done
fi
true
```
"""


@dataclass
class Listener:
    """A real socket on the host that counts the connections it accepts."""

    address: str  # where it listens
    reach: str = ""  # where a sandbox tries it (the address, unless that is 0.0.0.0)
    sock: socket.socket = field(init=False)
    accepted: int = 0

    def __post_init__(self) -> None:
        self.reach = self.reach or self.address
        self.sock = socket.create_server((self.address, 0))
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            with conn:
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def host_addresses() -> list[str]:
    """Every IPv4 address of this machine but loopback."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines()} - {"127.0.0.1"})


def network_gateway(mode: str) -> str:
    """This machine's address on the network run B's sandbox joins."""
    backend = Services(get_settings()).backend
    if mode == "allow":
        return backend.ensure_internal_network(get_settings().egress_network).address
    return backend.host_address() or ""


@pytest.fixture
def listeners(docker_backend, monkeypatch, request) -> Iterator[dict[str, Listener]]:
    """Host listeners a sandbox must not reach, and one the operator opts in."""
    mode = request.node.callspec.params["mode"]
    gateway = network_gateway("allow" if mode == "allow" else "default")
    found = {
        "loopback": Listener("127.0.0.1"),
        "any": Listener("0.0.0.0", reach=gateway),
        "docker0": Listener(bridge_gateway(docker_backend.api)),
        "opted_in": Listener("0.0.0.0", reach=gateway),
    }
    if gateway != found["docker0"].address:
        found["gateway"] = Listener(gateway)
    opted_in = found["opted_in"].port
    monkeypatch.setenv("PIER_SANDBOX_HOST_ALLOW", f"{gateway}:{opted_in}")
    get_settings.cache_clear()
    yield found
    for listener in found.values():
        listener.close()
    withdraw(gateway, opted_in)  # the opted-in port's rule was for this test only


def runbook(front: dict, body: str) -> str:
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + "\n---\n# Isolation\n" + body


def start(collection: str, front: dict, body: str, image: str) -> Trajectory:
    task = task_from_runbook(parse(runbook({"agent": "script", **front}, body)))
    request = RunRequest(collection=collection, task_name="isolation", task=task,
                         run_params={"snapshot": "", "image": image})  # fmt: skip
    return run(Services(get_settings()), request)


def running_sandbox(api, collection: str) -> dict:
    """Run A's container once its listener is up."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for found in api.containers(filters={"label": f"{LABEL_COLLECTION}={collection}"}):
            ready = api.exec_create(found["Id"], ["test", "-f", "/tmp/ready"])
            api.exec_start(ready["Id"])
            if api.exec_inspect(ready["Id"])["ExitCode"] == 0:
                return dict(api.inspect_container(found["Id"]))
        time.sleep(0.5)
    raise AssertionError(f"run A's sandbox ({collection}) never got its listener up")


def log_of(record: Trajectory) -> list[str]:
    return [e.line for e in Services(get_settings()).store.events(record.trajectory_id)][-30:]


def stop(api, container_id: str) -> None:
    api.exec_start(api.exec_create(container_id, ["touch", "/tmp/stop"])["Id"])


MODES = {
    "default": {},
    "allow": {"network": {"allow": []}},
    "none": {"network_enabled": False},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_no_sandbox_reaches_another_or_the_host(mode, runtime, base_image, docker_backend, listeners):
    api = docker_backend.api
    tag = uuid.uuid4().hex[:8]
    collection_a, collection_b = f"iso-a-{tag}", f"iso-b-{tag}"
    a_front = MODES["default"] if mode == "none" else MODES[mode]
    results: dict[str, Trajectory] = {}
    thread = threading.Thread(
        target=lambda: results.setdefault("a", start(collection_a, a_front, LISTENER, base_image))
    )
    thread.start()
    try:
        a = running_sandbox(api, collection_a)
        address = next(iter(a["NetworkSettings"]["Networks"].values()))["IPAddress"]
        targets = {
            "a_by_address": (address, PORT_IN_A),
            "a_by_name": (a["Name"].lstrip("/"), PORT_IN_A),
            "a_by_hostname": (a["Config"]["Hostname"], PORT_IN_A),
            **{f"host_{name}": (item.reach, item.port) for name, item in listeners.items()},
            **{f"any_at_{ip}": (ip, listeners["any"].port) for ip in host_addresses()},
        }
        name = a["Name"].lstrip("/")
        body = (PROBE.replace("TARGETS", json.dumps(targets)).replace("A_ADDRESS", address)
                .replace("A_NAME", name).replace("PORT", str(PORT_IN_A)))  # fmt: skip
        b = start(collection_b, MODES[mode], body, base_image)
    finally:
        for found in api.containers(filters={"label": f"{LABEL_COLLECTION}={collection_a}"}):
            stop(api, found["Id"])
        thread.join(WAIT_S)

    assert results["a"].status.value == "completed", results["a"].error
    assert (run_folder(results["a"]) / "results" / "self.txt").read_text() == "200", "A's listener was up"
    assert b.status.value == "completed", "\n".join([b.error or "", *log_of(b)])
    probes = json.loads((run_folder(b) / "results" / "probes.json").read_text())
    answered = {name: seen for name, seen in probes.items() if seen.startswith("answered")}
    if mode == "none":
        assert not answered, answered
    else:
        assert set(answered) == {"host_opted_in"}, probes
        assert listeners["opted_in"].accepted == 1
    accepted = {name: item.accepted for name, item in listeners.items() if name != "opted_in"}
    assert not any(accepted.values()), accepted
    if mode == "allow":
        for proxied in (run_folder(b) / "results").glob("proxy-*.txt"):
            text = proxied.read_text()
            assert "Directory listing" not in text and not text.endswith("exit=0\n"), (proxied.name, text)
        assert len(list((run_folder(b) / "results").glob("proxy-*.txt"))) == 2
    assert not [w for w in b.outputs.warnings if "services on this machine" in w], b.outputs.warnings


def test_pier_s_model_gateway_still_answers_a_default_mode_sandbox(runtime, base_image, docker_backend):
    """The fence admits pier's own service: the gateway on the sandbox network's
    gateway address answers (any HTTP status) where everything else is refused."""
    from pier.gateway import shared_gateway
    from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
    from pier.sandbox.docker.backend import DockerBackend

    backend = DockerBackend(get_settings())
    host = backend.host_address()
    assert host
    gateway = shared_gateway(host, 0, None)
    assert backend.admit(host, gateway.port) is None
    spec = SandboxSpec(image=base_image, limits=Limits(cpus=1, memory="256M", disk=None),
                       labels={LABEL_RUN: f"iso-gw-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    sandbox = backend.create(spec)
    try:
        seen = sandbox.exec(
            f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' http://{host}:{gateway.port}/v1/models"
        )
    finally:
        sandbox.delete()
    assert seen.output.strip().isdigit() and seen.output.strip() != "000", seen.output
    # no note that the fence is missing (runsc adds one about its process limit)
    assert not [note for note in sandbox.notes if "services on this machine" in note], sandbox.notes
