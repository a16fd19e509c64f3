"""The model gateway obeys the operator, never a tenant, tried with collection
tokens against a real `pier serve` on Docker running the real claude-code CLI:

- a trial-key run whose secret_params name ANTHROPIC_BASE_URL, and a run whose
  collection environment names it beside the collection's own key, aim pier's
  host at a counting listener on 127.0.0.1: it must get nothing (0 requests,
  and never the trial key);
- tenant B aims ANTHROPIC_BASE_URL at a listener in tenant A's live sandbox:
  A's listener must see no request;
- the endpoint the operator allowed for one collection (PIER_COLLECTION_UPSTREAMS)
  is reached with that collection's own key, and refused to every other
  collection and to the trial key.

Each refusal is a 422 at accept naming the setting that would allow it."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from tests.support.api_server import ADMIN_TOKEN, Collection, Server
from tests.support.model_server import ModelServer

from pier.sandbox.base import LABEL_COLLECTION

pytestmark = pytest.mark.integration

TRIAL = "sk-ant-trial-" + "t" * 8 + "0123456789abcdefGHI"
OWN_KEY = "sk-ant-own-" + uuid.uuid4().hex
ALLOWED = f"gw-own-{uuid.uuid4().hex[:8]}"  # the collection the operator lets bring its endpoint
RUN_WAIT_S = 300
PORT_IN_A = 8080


class Counting:
    """A listener on 127.0.0.1 counting the requests it is sent (and what they
    carried); it answers each with an empty 200."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                self.requests.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            except OSError:
                pass

    def carried(self, secret: str) -> bool:
        return any(secret.encode() in r for r in self.requests)


@pytest.fixture(scope="module")
def attacked() -> Iterator[Counting]:
    made = Counting()
    yield made
    made.sock.close()


@pytest.fixture(scope="module")
def own_endpoint() -> Iterator[ModelServer]:
    """The model server of the collection the operator allowed its own endpoint."""
    made = ModelServer("127.0.0.1").start()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, docker_backend, agent_image, own_endpoint: ModelServer) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("pier-upstreams")
    port = own_endpoint.url.rsplit(":", 1)[1]
    settings = {
        "PIER_TRIAL_KEYS": json.dumps({"ANTHROPIC_API_KEY": TRIAL}),
        "PIER_TRIAL_RUNS": "10",
        "PIER_COLLECTION_UPSTREAMS": json.dumps({ALLOWED: [f"127.0.0.1:{port}"]}),
    }
    srv = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    yield srv
    srv.stop()


def collection(server: Server, image: str, name: str | None = None, env: dict | None = None) -> Collection:
    name = name or f"gw-{uuid.uuid4().hex[:10]}"
    with server.client(ADMIN_TOKEN) as admin:
        r = admin.post("/api/v1/collections", json={"name": name})
        assert r.status_code == 201, r.text
    made = Collection(name=name, token=r.json()["token"], server=server, image=image)
    made.put_task("ask", "Say hello.", agent="claude-code", model="claude-sonnet-4-5")
    if env:
        with made.client() as c:
            r = c.patch(f"/api/v1/collections/{name}/environment", json={"environment_variables": env})
            assert r.status_code == 200, r.text
    return made


def post_run(made: Collection, **body: object) -> tuple[int, str, dict | None]:
    """Start the task; when pier accepts it, wait for its end (so that whatever
    it would send has been sent)."""
    with made.client() as c:
        r = c.post(f"/api/v1/run/{made.name}/ask", json=body)
    record = made.wait("ask", r.json()["trajectory_id"], timeout=RUN_WAIT_S) if r.status_code == 200 else None
    time.sleep(0.5)  # a request in flight is counted by now
    return r.status_code, r.text, record


def assert_refused_naming_the_setting(status: int, text: str, variable: str = "ANTHROPIC_BASE_URL") -> None:
    assert status == 422, text
    detail = json.loads(text)["detail"]
    assert variable in detail and "PIER_COLLECTION_UPSTREAMS" in detail, detail


def trial_runs_used(made: Collection) -> int:
    with made.client() as c:
        return c.get(f"/api/v1/trial/{made.name}").json()["runs_used"]


def test_a_trial_key_run_cannot_name_its_upstream(server: Server, agent_image: str, attacked: Counting):
    tenant = collection(server, agent_image)
    status, text, _ = post_run(
        tenant, use_trial_keys=True, secret_params={"ANTHROPIC_BASE_URL": attacked.url}
    )
    print(f"trial key via secret_params: HTTP {status}, listener got {len(attacked.requests)} request(s)")
    assert not attacked.carried(TRIAL), "the operator's trial key reached the tenant's listener"
    assert len(attacked.requests) == 0, attacked.requests[:1]
    assert_refused_naming_the_setting(status, text)
    assert trial_runs_used(tenant) == 0, "a refused run used a trial run"


def test_a_collection_environment_cannot_aim_the_gateway_at_loopback(
    server: Server, agent_image: str, attacked: Counting
):
    before = len(attacked.requests)
    tenant = collection(
        server, agent_image, env={"ANTHROPIC_API_KEY": OWN_KEY, "ANTHROPIC_BASE_URL": attacked.url + "/x"}
    )
    status, text, _ = post_run(tenant)
    print(
        f"own key via the collection environment: HTTP {status}, listener got {len(attacked.requests) - before}"
    )
    assert len(attacked.requests) == before, attacked.requests[before:][:1]
    assert_refused_naming_the_setting(status, text)


def _sandbox_of(api, name: str) -> dict:
    deadline = time.monotonic() + RUN_WAIT_S
    while time.monotonic() < deadline:
        for found in api.containers(filters={"label": f"{LABEL_COLLECTION}={name}"}):
            ready = api.exec_create(found["Id"], ["test", "-f", "/tmp/ready"])
            api.exec_start(ready["Id"])
            if api.exec_inspect(ready["Id"])["ExitCode"] == 0:
                return dict(api.inspect_container(found["Id"]))
        time.sleep(0.5)
    raise AssertionError(f"tenant A's sandbox ({name}) never got its listener up")


# Tenant A: a listener in its sandbox that logs every request, until told to stop.
LISTENER = f"""python3 -m http.server {PORT_IN_A} > /tmp/http.log 2>&1 &
for i in $(seq 1 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', {PORT_IN_A}), 1)" \\
  2>/dev/null && break; sleep 0.2; done
touch /tmp/ready
for i in $(seq 1 1200); do [ -f /tmp/stop ] && break; sleep 0.5; done
grep -c '"POST ' /tmp/http.log > {{{{results_dir}}}}/hits.txt || true"""


def test_tenant_b_cannot_make_the_gateway_reach_tenant_a_s_sandbox(
    server: Server, agent_image: str, base_image: str, docker_backend
):
    api = docker_backend.api
    a = collection(server, base_image)
    a.put_task("listen", LISTENER)
    a_run = a.run("listen")
    try:
        found = _sandbox_of(api, a.name)
        address = next(iter(found["NetworkSettings"]["Networks"].values()))["IPAddress"]
        b = collection(
            server,
            agent_image,
            env={"ANTHROPIC_API_KEY": OWN_KEY, "ANTHROPIC_BASE_URL": f"http://{address}:{PORT_IN_A}"},
        )
        status, text, _ = post_run(b)
    finally:
        for container in api.containers(filters={"label": f"{LABEL_COLLECTION}={a.name}"}):
            api.exec_start(api.exec_create(container["Id"], ["touch", "/tmp/stop"])["Id"])
    record = a.wait("listen", a_run, timeout=RUN_WAIT_S)
    assert record["status"] == "completed", record.get("error")
    with a.client() as c:
        hits = c.get(f"/api/v1/file/{a.name}/listen/{a_run}/results/hits.txt")
    assert hits.status_code == 200, hits.text
    print(
        f"tenant B -> tenant A's sandbox {address}:{PORT_IN_A}: HTTP {status}, A's listener got {hits.text.strip()}"
    )
    assert hits.text.strip() == "0", "tenant B's run reached tenant A's sandbox through the gateway"
    assert_refused_naming_the_setting(status, text)


def test_the_endpoint_the_operator_allowed_serves_that_collection_only(
    server: Server, agent_image: str, own_endpoint: ModelServer
):
    env = {"ANTHROPIC_API_KEY": OWN_KEY, "ANTHROPIC_BASE_URL": own_endpoint.url}
    allowed = collection(server, agent_image, name=ALLOWED, env=env)
    status, text, record = post_run(allowed)
    assert status == 200, text
    assert record is not None and record["status"] == "completed", record and record.get("error")
    calls = own_endpoint.model_calls()
    assert calls and {c.credential for c in calls} == {OWN_KEY}, "the allowed collection's calls reached it"

    own_endpoint.clear()
    other = collection(server, agent_image, env=env)
    status, text, _ = post_run(other)
    print(f"another collection -> the allowed endpoint: HTTP {status}, it got {len(own_endpoint.requests)}")
    assert own_endpoint.requests == []
    assert_refused_naming_the_setting(status, text)

    # The allowed collection with the trial key instead of its own: the key goes nowhere but the operator's.
    with allowed.client() as c:
        r = c.patch(f"/api/v1/collections/{ALLOWED}/environment",
                    json={"environment_variables": {"ANTHROPIC_API_KEY": None}})  # fmt: skip
        assert r.status_code == 200, r.text
    status, text, _ = post_run(allowed, use_trial_keys=True)
    assert own_endpoint.requests == [] and not any(
        TRIAL in json.dumps(r.headers) for r in own_endpoint.requests
    )
    assert status == 422, text
    assert "trial key" in json.loads(text)["detail"], text
