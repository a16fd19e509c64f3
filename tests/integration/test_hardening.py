"""The hardened default sandbox on a real engine: what `docker inspect` shows, what
the kernel says inside, and that root still installs packages with apt-get."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.hardening import KEEP_CAPS
from pier.sandbox.docker.sandbox import DockerSandbox

pytestmark = pytest.mark.integration

# Bit numbers in /proc/<pid>/status Cap* masks (linux/capability.h).
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7,
            "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27,
            "AUDIT_WRITE": 29, "SETFCAP": 31}  # fmt: skip


@pytest.fixture
def sandbox(docker_backend: DockerBackend, base_image: str) -> Iterator[DockerSandbox]:
    spec = SandboxSpec(image=base_image, limits=Limits(), labels={LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}"})
    made = docker_backend.create(spec)
    yield made
    made.delete()


def status_field(sandbox: DockerSandbox, name: str) -> str:
    result = sandbox.exec(f"grep '^{name}:' /proc/self/status", workdir="/")
    assert result.ok, result.output
    return result.output.split(":", 1)[1].strip()


def test_docker_inspect_shows_the_hardening(sandbox, docker_backend):
    host = docker_backend.api.inspect_container(sandbox.id)["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert set(host["CapAdd"]) == set(KEEP_CAPS)
    assert host["SecurityOpt"] == ["no-new-privileges:true"]  # no seccomp=unconfined
    assert host["PidsLimit"] == Limits().pids
    assert host["IpcMode"] == "private"
    assert not host["Binds"] and not host["Privileged"]


def test_the_kernel_enforces_it_inside(sandbox):
    effective = int(status_field(sandbox, "CapEff"), 16)
    held = {name for name, bit in CAP_BITS.items() if effective >> bit & 1}
    assert held == set(KEEP_CAPS)
    assert status_field(sandbox, "NoNewPrivs") == "1"
    assert status_field(sandbox, "Seccomp") == "2"  # a filter: the engine's default profile
    raw = sandbox.exec(["python3", "-c", "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)"])
    assert not raw.ok and "Operation not permitted" in raw.output
    node = sandbox.exec(["mknod", "/tmp/null2", "c", "1", "3"], workdir="/")
    assert not node.ok and "Operation not permitted" in node.output


def test_root_still_installs_packages_with_apt_get(sandbox):
    result = sandbox.exec(
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends jq >/dev/null && jq --version",
        timeout=300,
    )
    assert result.ok, result.output[-2000:]
    assert "jq-" in result.output


def test_sandbox_cap_add_gives_a_capability_back(docker_backend, base_image, monkeypatch):
    settings = docker_backend._settings.model_copy(update={"sandbox_cap_add": "NET_RAW"})
    backend = DockerBackend(settings, api=docker_backend.api)
    spec = SandboxSpec(image=base_image, limits=Limits(), labels={LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}"})
    made = backend.create(spec)
    try:
        raw = made.exec(["python3", "-c", "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)"])
        assert raw.ok, raw.output
    finally:
        made.delete()
