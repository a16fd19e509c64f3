"""The fence forgets what is gone: a port the fence opened for a pier process (its
model gateway's) is closed when that process stops, and when it died instead
(SIGKILL: no exit hook ran), the next pier process to start removes the rule.
Asserted on the real iptables chain and from inside a sandbox, against a real
listener that later takes the dead process's port and counts every connection."""

from __future__ import annotations

import shlex
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.fence import CHAIN
from pier.settings import get_settings

pytestmark = pytest.mark.integration

# A pier process: its model gateway on the sandbox network's gateway address,
# admitted through the fence as a run's would be; the port printed; then it
# stops (exit) or dies (kill).
PIER_PROCESS = """
import os, signal, sys
from pier.gateway import shared_gateway
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import get_settings

backend = DockerBackend(get_settings())
host = backend.host_address()
gateway = shared_gateway(host, 0, None)
assert backend.admit(host, gateway.port) is None
print(gateway.port, flush=True)
if sys.argv[1] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
"""

# The next pier process: its first sandbox puts the fence up.
NEXT_START = """
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import get_settings

backend = DockerBackend(get_settings())
backend._fence(backend.sandbox_network())
"""


class Counting:
    """A real listener on (address, port) that counts the connections it accepts."""

    def __init__(self, address: str, port: int):
        self.sock = socket.create_server((address, port))
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    def close(self) -> None:
        self.sock.close()


def pier_process(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def rules_for(port: int) -> list[str]:
    listing = subprocess.run(["iptables", "-w", "5", "-S", CHAIN], capture_output=True, text=True, check=True)
    return [line for line in listing.stdout.splitlines() if f"--dport {port} " in line]


@pytest.fixture
def ports_seen() -> Iterator[list[int]]:
    """Ports this test made a process admit; whatever rule for them is left at the
    end (on code without the fix) is removed, so no port stays open."""
    seen: list[int] = []
    yield seen
    for port in seen:
        for line in rules_for(port):
            subprocess.run(["iptables", "-w", "5", "-D", *shlex.split(line)[1:]], check=False)


@pytest.fixture
def backend(docker_backend) -> DockerBackend:
    if DockerBackend(get_settings()).isolation_problem():
        pytest.skip("the fence cannot be put up here (no iptables or no right to change it)")
    return DockerBackend(get_settings())


def test_a_stopping_pier_process_closes_its_ports(backend, ports_seen):
    done = pier_process(PIER_PROCESS, "exit")
    assert done.returncode == 0, done.stderr
    port = int(done.stdout.strip())
    ports_seen.append(port)
    assert rules_for(port) == []


def test_ports_of_a_pier_process_that_died_are_closed_at_the_next_start(backend, base_image, ports_seen):
    died = pier_process(PIER_PROCESS, "die")
    assert died.returncode == -signal.SIGKILL, died.stderr
    port = int(died.stdout.strip())
    ports_seen.append(port)
    assert len(rules_for(port)) == 1, "the dead process's rule is left until the next start"

    started = pier_process(NEXT_START)
    assert started.returncode == 0, started.stderr
    assert rules_for(port) == [], rules_for(port)

    # Whatever takes the dead process's port later is not reachable from a sandbox.
    host = backend.host_address()
    assert host
    listener = Counting(host, port)
    spec = SandboxSpec(image=base_image, limits=Limits(cpus=1, memory="256M", disk=None),
                       labels={LABEL_RUN: f"fence-ports-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    sandbox = backend.create(spec)
    try:
        seen = sandbox.exec(f"curl -sS -m 10 http://{host}:{port}/; echo exit=$?")
    finally:
        sandbox.delete()
        listener.close()
    assert "hello" not in seen.output and "exit=0" not in seen.output, seen.output
    assert listener.accepted == 0
