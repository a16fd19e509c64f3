"""Server-side request forgery, tried with a collection token against a real
`pier serve`: a webhook, an image's registry, a check source cloned on the host,
an egress allow-list entry and an egress upstream each aim pier at a listener on
this machine's loopback or on the Docker bridge gateway. Each listener counts
the connections it is offered: 0 is the only right answer, and the refusal
names the field and the setting that would permit it. A second server whose
operator opted a listener in (PIER_OUTBOUND_ALLOW) does connect to it."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import Collection, Server, make_collection, runbook
from tests.support.model_server import bridge_gateway

from pier.egress import EgressProxy, allow_list
from pier.outbound import OutboundPolicy

pytestmark = pytest.mark.integration


class Counting:
    """A TCP listener that counts connections; it answers any request with an
    HTTP 200 (what an internal admin endpoint would do)."""

    def __init__(self, host: str):
        self.host = host
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            except OSError:
                pass

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture(scope="module")
def gateway(docker_backend) -> str:
    return bridge_gateway(docker_backend.api)


@pytest.fixture(scope="module")
def targets(gateway: str) -> Iterator[dict[str, Counting]]:
    """The listeners an attacker aims at, and the ones the operator opted in."""
    made = {
        "loopback": Counting("127.0.0.1"),
        "bridge": Counting(gateway),
        "opted_loopback": Counting("127.0.0.1"),
        "opted_bridge": Counting(gateway),
    }
    yield made
    for listener in made.values():
        listener.close()


def _server(tmp_path_factory, new_db, settings: dict[str, str]) -> Iterator[Server]:
    srv = Server(home=tmp_path_factory.mktemp("pier-ssrf"), db_url=new_db(), settings=settings).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def new_db(tmp_path_factory):
    return lambda: f"sqlite:///{tmp_path_factory.mktemp('db') / 'pier.db'}"


@pytest.fixture(scope="module")
def strict(tmp_path_factory, new_db, docker_backend, base_image) -> Iterator[Server]:
    """A server with the default policy: nothing local is allowed."""
    yield from _server(tmp_path_factory, new_db, {"PIER_OUTBOUND_ALLOW": ""})


@pytest.fixture(scope="module")
def opted(tmp_path_factory, new_db, targets, docker_backend, base_image) -> Iterator[Server]:
    allow = f"{targets['opted_loopback'].address},{targets['opted_bridge'].address}"
    yield from _server(tmp_path_factory, new_db, {"PIER_OUTBOUND_ALLOW": allow})


@pytest.fixture
def attacker(strict: Server, base_image: str) -> Collection:
    return make_collection(strict, base_image, prefix="ssrf")


def attempt(collection: Collection, init_params: dict, **body: object) -> tuple[int, str]:
    collection.put_task("t", "echo hi")
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/t", json={"init_params": init_params, **body})
    return r.status_code, r.text


def aimed(targets: dict[str, Counting]) -> list[str]:
    """Every way of writing the attacked listeners' addresses (a name that resolves
    to loopback on every machine, IPv4-mapped IPv6, the bridge gateway)."""
    lo, gw = targets["loopback"], targets["bridge"]
    return [lo.address, f"localhost:{lo.port}", f"localhost.:{lo.port}", f"[::ffff:127.0.0.1]:{lo.port}",
            f"{socket.gethostname()}:{lo.port}", gw.address]  # fmt: skip


def assert_untouched(targets: dict[str, Counting]) -> None:
    time.sleep(0.5)  # a connection in flight would be counted by now
    assert targets["loopback"].connections == 0
    assert targets["bridge"].connections == 0


def assert_refused(status: int, text: str, field: str) -> None:
    assert status == 422, text
    detail = json.loads(text)["detail"]
    assert field in detail and "is not an allowed destination" in detail, detail
    assert "PIER_OUTBOUND_ALLOW" in detail, detail
    assert "refused" not in detail.lower() and "open" not in detail.lower(), detail  # no port oracle


def test_a_webhook_to_this_machine_is_refused_at_accept(attacker, targets):
    for where in aimed(targets):
        status, text = attempt(attacker, {}, webhook_url=f"http://{where}/internal-admin")
        assert_refused(status, text, "webhook_url")
        status, text = attempt(attacker, {"webhook_url": f"https://{where}/"})
        assert_refused(status, text, "webhook_url")
    assert_untouched(targets)


def test_a_webhook_to_loopback_spelled_as_ipv4_in_ipv6_is_refused(attacker, targets):
    """IPv4-compatible (`::127.0.0.1`) and IPv4-translated (`::ffff:0:127.0.0.1`)
    IPv6 carry loopback as surely as the mapped form: pier.outbound's one
    normaliser reads all three as 127.0.0.1."""
    port = targets["loopback"].port
    for where in (f"[::127.0.0.1]:{port}", f"[::ffff:0:127.0.0.1]:{port}", f"[0:0:0:0:0:0:127.0.0.1]:{port}"):
        status, text = attempt(attacker, {}, webhook_url=f"http://{where}/internal-admin")
        assert_refused(status, text, "webhook_url")
        assert "loopback" in json.loads(text)["detail"]
    assert_untouched(targets)


def test_an_image_from_a_registry_on_this_machine_is_refused(attacker, targets):
    for where in aimed(targets):
        status, text = attempt(attacker, {"image": f"{where}/evil:1", "snapshot": ""})
        assert_refused(status, text, "image")
        status, text = attempt(attacker, {"base_image": f"{where}/evil:1", "snapshot": "", "image": ""})
        assert_refused(status, text, "base_image")
    assert_untouched(targets)


def test_a_check_source_cloned_on_the_host_from_this_machine_is_refused(attacker, targets):
    for where in aimed(targets):
        for scheme in ("http", "https", "git"):
            check = {"name": "c", "type": "code", "source": f"{scheme}://{where}/repo.git", "run": "true"}
            status, text = attempt(attacker, {"checks": [check], "network_enabled": False})
            assert_refused(status, text, "checks.c.source")
    assert_untouched(targets)


def test_allow_list_entries_for_local_destinations_are_refused(attacker, targets):
    entries = [*aimed(targets), "127.0.0.1", "localhost", "::1", "[::1]:443", "169.254.169.254", "10.0.0.1"]
    for entry in entries:
        status, text = attempt(attacker, {"network": {"allow": [entry]}})
        assert_refused(status, text, f"network.allow: '{entry}'")
    assert_untouched(targets)


def test_the_egress_proxy_refuses_a_local_upstream_before_connecting(gateway, targets):
    """At connect time, on the proxy sandboxes use: a grant whose list names this
    machine (as a name that passed accept and now resolves here would) still
    never reaches it."""
    proxy = EgressProxy(gateway).start()
    lo, gw = targets["loopback"], targets["bridge"]
    names = [lo.address, f"localhost:{lo.port}", f"{socket.gethostname()}:{lo.port}", gw.address]
    try:
        grant = proxy.open("ssrf", allow_list(names), ttl_s=60, policy=OutboundPolicy())
        for target in names:
            with socket.create_connection((gateway, proxy.port), timeout=10) as sock:
                auth = base64.b64encode(f"pier:{grant.token}".encode()).decode()
                sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
                             f"Proxy-Authorization: Basic {auth}\r\n\r\n".encode())  # fmt: skip
                answer = sock.recv(4096).decode()
            assert answer.startswith("HTTP/1.1 403") and "is not allowed" in answer, answer
    finally:
        proxy.stop()
    assert_untouched(targets)


def test_the_cli_refuses_a_local_allow_list_entry_naming_the_setting(tmp_path: Path, targets):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(runbook("echo hi", snapshot="", network={"allow": [targets["loopback"].address]}))
    done = subprocess.run([sys.executable, "-m", "pier.cli", "run", str(path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert f"'{targets['loopback'].address}'" in said and "PIER_OUTBOUND_ALLOW" in said, said
    assert_untouched(targets)


# What the operator opted in works.


def test_an_opted_in_webhook_is_delivered(opted: Server, base_image: str, targets):
    collection = make_collection(opted, base_image, prefix="ssrf-ok")
    listener = targets["opted_loopback"]
    before = listener.connections
    collection.put_task("t", "echo hi")
    tid = collection.run("t", webhook_url=f"http://{listener.address}/hook")
    collection.wait("t", tid, timeout=180)
    deadline = time.monotonic() + 30
    while listener.connections == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert listener.connections > before, "the opted-in webhook receiver got nothing"


def test_an_opted_in_registry_is_reached_by_the_engine(opted: Server, base_image: str, targets):
    collection = make_collection(opted, base_image, prefix="ssrf-ok")
    listener = targets["opted_loopback"]
    before = listener.connections
    status, text = attempt(collection, {"image": f"{listener.address}/pier-ssrf-test:1", "snapshot": ""})
    assert status == 200, text
    record = collection.wait("t", json.loads(text)["trajectory_id"], timeout=180)
    assert record["status"] == "failed"  # the listener is no registry
    assert listener.connections > before, "the engine never asked the opted-in registry"


def test_an_opted_in_egress_destination_answers_through_the_proxy(opted: Server, base_image: str, targets):
    collection = make_collection(opted, base_image, prefix="ssrf-ok")
    listener = targets["opted_bridge"]
    before = listener.connections
    script = (f"curl -s -m 20 -o /dev/null -w '%{{http_code}}' https://{listener.address}/ "
              "> {{results_dir}}/code.txt || true")  # fmt: skip
    collection.put_task("egress", script, network={"allow": [listener.address]})
    tid = collection.run("egress")
    record = collection.wait("egress", tid, timeout=240)
    assert record["status"] == "completed", json.dumps(record)[-3000:]
    assert listener.connections > before, "the opted-in destination was never reached"
