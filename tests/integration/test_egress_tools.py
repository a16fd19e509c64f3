"""What agents install with, through the allow-list fence, with the real tools in
an allow-listed sandbox on the Debian test image: apt-get against the machine's
Debian mirror (plain HTTP), curl http://, git over plain HTTP, pip and npm; and
hosts off the list refused with a message that says what to add, and named with
a count in the run's log.

The hosts off the list are listeners of this test on the Docker bridge address
that count connections; the operator's PIER_OUTBOUND_ALLOW names them, so only
the run's allow-list stands between the sandbox and them."""

from __future__ import annotations

import functools
import http.server
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.test_egress import outputs, start
from tests.support.model_server import bridge_gateway

from pier.agents import get_agent
from pier.settings import get_settings

pytestmark = pytest.mark.integration

MIRROR = "deb.debian.org"  # the test image's (and this machine's) apt source
PYPI = ("pypi.org", "files.pythonhosted.org")
NPM = "registry.npmjs.org"
PORTS = iter(range(21150, 21199))  # this test file's share of the session's range


class Counting(socketserver.BaseRequestHandler):
    """Counts connections; answers anything with 200 "reached" (what a service
    listening on the host would give a sandbox that got through)."""

    def handle(self) -> None:
        self.server.connections += 1  # type: ignore[attr-defined]
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nreached")


def _serve(handler: type[socketserver.BaseRequestHandler], address: str) -> socketserver.ThreadingTCPServer:
    for port in PORTS:
        try:
            server = socketserver.ThreadingTCPServer((address, port), handler)
        except OSError:
            continue
        server.daemon_threads = True
        server.connections = 0  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    raise RuntimeError("no free port in 21150-21198")


@pytest.fixture
def bridge(docker_backend) -> str:
    return bridge_gateway(docker_backend.api)


@pytest.fixture
def unlisted(bridge) -> Iterator[list[socketserver.ThreadingTCPServer]]:
    """Two counting listeners on the bridge address: one asked over HTTP, one over HTTPS."""
    servers = [_serve(Counting, bridge), _serve(Counting, bridge)]
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def git_server(bridge, tmp_path) -> Iterator[str]:
    """A git repository served over plain (dumb) HTTP on the bridge address: host:port."""
    repo = tmp_path / "served" / "repo.git"
    work = tmp_path / "work"
    git = ["git", "-c", "user.name=pier", "-c", "user.email=pier@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "README").write_text("served through pier's egress proxy\n")
    subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "update-server-info"], check=True)
    handler = functools.partial(Quiet, directory=str(tmp_path / "served"))
    server = _serve(handler, bridge)  # type: ignore[arg-type]
    yield f"{bridge}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def operator_allows(monkeypatch: pytest.MonkeyPatch, *entries: str) -> None:
    """This machine resolves the package hosts to a non-public address (its own
    egress proxy's): the operator opts them in, as in test_egress."""
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", ",".join(entries))
    get_settings.cache_clear()


PROBE = r"""
set +e
out={{results_dir}}
probe() {  # name, command: its output and exit code into results/<name>.txt
  name=$1; shift
  { "$@"; echo "exit=$?"; } > "$out/$name.txt" 2>&1
}
"""


def log_lines(record) -> list[str]:
    from pier.lifecycle.start import Services

    return [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]


def test_apt_curl_http_and_git_work_and_unlisted_hosts_are_refused(
    base_image, unlisted, git_server, bridge, monkeypatch
):
    http_host, https_host = (f"{bridge}:{s.server_address[1]}" for s in unlisted)
    operator_allows(monkeypatch, MIRROR, http_host, https_host, git_server)
    body = (
        PROBE
        + rf"""
probe apt_update env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY apt-get update --error-on=any
probe apt_install apt-get install -y --no-install-recommends tree
probe tree tree --version
probe curl_http curl -sS -m 30 -o /dev/null -w '%{{http_code}}\n' http://{MIRROR}/debian/dists/bookworm/Release
probe git git clone -q http://{git_server}/repo.git /tmp/repo
cat /tmp/repo/README >> "$out/git.txt"
probe refused_http curl -sS -m 30 -w '%{{http_code}}\n' http://{http_host}/
probe refused_http_again curl -sS -m 30 http://{http_host}/again
probe refused_https curl -sS -m 30 -v https://{https_host}/
env | grep -i _proxy | sed 's/pier-egress-[^@]*/TOKEN/' > "$out/env.txt"
"""
    )
    record = start({"agent": "script", "network": {"allow": [MIRROR, git_server]}},
                   f"```bash\n{body}\n```\n", base_image)  # fmt: skip

    assert record.status.value == "completed", record.error
    seen = outputs(record)
    # every index fetched (--error-on=any: a fetch that failed fails it), with the
    # environment's proxy variables gone (as under sudo): apt's drop-in names the proxy
    update = seen["apt_update"]
    assert f"Get:1 http://{MIRROR}/debian bookworm InRelease" in update and update.endswith("exit=0\n"), (
        update
    )
    assert seen["apt_install"].endswith("exit=0\n"), seen["apt_install"]
    assert seen["tree"].startswith("tree v") and "exit=0" in seen["tree"], seen["tree"]
    assert seen["curl_http"].splitlines() == ["200", "exit=0"], seen["curl_http"]
    assert "exit=0" in seen["git"] and "served through pier's egress proxy" in seen["git"], seen["git"]
    message = "pier's egress allow-list refused {}: add it to network.allow (this run allows deb.debian.org, "
    assert seen["refused_http"].startswith(message.format(http_host)), seen["refused_http"]
    assert seen["refused_http"].endswith("\n403\nexit=0\n"), seen[
        "refused_http"
    ]  # curl's own exit: it got an answer
    assert f"< HTTP/1.1 403 {message.format(https_host)}" in seen["refused_https"], seen["refused_https"]
    assert not seen["refused_https"].endswith("exit=0\n"), seen["refused_https"]
    assert "reached" not in seen["refused_http"] + seen["refused_https"]
    assert [s.connections for s in unlisted] == [0, 0]  # type: ignore[attr-defined]
    assert "http_proxy=http://pier:TOKEN@" in seen["env"] and "HTTP_PROXY=http://pier:TOKEN@" in seen["env"]
    refused = [line for line in log_lines(record) if line.startswith("egress refused")]
    assert refused == [
        f"egress refused 3 request(s) to 2 host(s) (add to network.allow what the run needs): "
        f"{http_host} (2), {https_host} (1)"
    ], refused


def test_pip_installs_through_the_fence(base_image, monkeypatch):
    operator_allows(monkeypatch, *PYPI)
    body = (
        PROBE
        + r"""
probe pip pip3 install --no-cache-dir --break-system-packages --target /tmp/site six==1.16.0
probe import env PYTHONPATH=/tmp/site python3 -c "import six; print(six.__version__)"
"""
    )
    record = start(
        {"agent": "script", "network": {"allow": list(PYPI)}}, f"```bash\n{body}\n```\n", base_image
    )
    assert record.status.value == "completed", record.error
    seen = outputs(record)
    assert seen["pip"].endswith("exit=0\n"), seen["pip"]
    assert seen["import"].splitlines() == ["1.16.0", "exit=0"], seen["import"]


@pytest.fixture
def node_image(docker_backend, base_image) -> str:
    """The test image with Node and npm: pier's claude-code agent layer on it
    (built once and cached, as any claude-code run would)."""
    recipe = get_agent("claude-code").layer()
    assert recipe is not None
    return docker_backend.ensure_layer(base_image, recipe, lambda line: None, timeout=900).image


def test_npm_installs_through_the_fence(node_image, monkeypatch, tmp_path: Path):
    operator_allows(monkeypatch, NPM)
    body = (
        PROBE
        + r"""
probe npm npm install --no-audit --no-fund --prefix /tmp/n is-number@7.0.0
probe require node -e "console.log(require('/tmp/n/node_modules/is-number')(5))"
"""
    )
    record = start({"agent": "script", "network": {"allow": [NPM]}}, f"```bash\n{body}\n```\n", node_image)
    assert record.status.value == "completed", record.error
    seen = outputs(record)
    assert seen["npm"].endswith("exit=0\n"), seen["npm"]
    assert seen["require"].splitlines() == ["true", "exit=0"], seen["require"]
