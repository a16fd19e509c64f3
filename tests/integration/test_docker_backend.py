"""What only the Docker backend promises, on a real engine: root in /app under
docker-init, the container's limits and labels, images, the sweep. The contract
every backend keeps is checked by test_sandbox_conformance.py."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import docker.errors
import pytest

from pier.errors import ImageError
from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_DEADLINE,
    LABEL_OWNER,
    LABEL_RUN,
    Limits,
    SandboxSource,
    SandboxSpec,
)
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.dockerfile import generate_recipe
from pier.sandbox.owner import owner_label
from pier.sandbox.sweeper import sweep
from pier.settings import Settings

pytestmark = pytest.mark.integration

MakeSandbox = Callable[..., DockerSandbox]


@pytest.fixture
def make_sandbox(docker_backend: DockerBackend, base_image: str) -> Iterator[MakeSandbox]:
    """Creates sandboxes on the test image, each labelled with a fresh run id, and
    deletes them all at the end of the test."""
    made: list[DockerSandbox] = []

    def make(
        labels: dict[str, str] | None = None,
        image: str | None = None,
        files: dict[str, bytes] | None = None,
        **limits: object,
    ) -> DockerSandbox:
        run_labels = {LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}", **(labels or {})}
        limited = Limits(**limits)  # type: ignore[arg-type]
        spec = SandboxSpec(image=image or base_image, limits=limited, labels=run_labels, files=files or {})
        sandbox = docker_backend.create(spec)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.delete()


def inspect(backend: DockerBackend, sandbox: DockerSandbox) -> dict:
    return backend.api.inspect_container(sandbox.id)


def test_a_sandbox_runs_commands_as_root_in_app(make_sandbox, docker_backend):
    sandbox = make_sandbox(memory="256m")
    result = sandbox.exec('echo "$(id -u) $(pwd) $(hostname)"; echo oops >&2; exit 3')
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    trajectory_id = inspect(docker_backend, sandbox)["Config"]["Labels"][LABEL_RUN]
    assert result.output == f"0 /app pier-{trajectory_id}\noops\n"
    assert sandbox.exec(["cat", "/proc/1/cmdline"]).output.startswith("/sbin/docker-init")


def test_network_on_reaches_pypi(make_sandbox):
    curl = "curl -sS -m 20 -o /dev/null -w '%{http_code}' https://pypi.org/simple/six/"
    result = make_sandbox(memory="256m").exec(curl, timeout=30)
    assert result.ok and result.output == "200", result.output


def test_limits_are_set_on_the_container(make_sandbox, docker_backend):
    sandbox = make_sandbox(cpus=1.5, memory="128m", pids=200, network=False)
    host = inspect(docker_backend, sandbox)["HostConfig"]
    assert host["NanoCpus"] == 1_500_000_000
    assert host["Memory"] == host["MemorySwap"] == 128 << 20
    assert host["PidsLimit"] == 200
    assert host["Init"] is True and host["NetworkMode"] == "none"
    labels = inspect(docker_backend, sandbox)["Config"]["Labels"]
    assert LABEL_CREATED in labels and labels[LABEL_OWNER] == owner_label()


def test_delete_removes_the_container(make_sandbox, docker_backend):
    sandbox = make_sandbox(memory="256m")
    assert docker_backend.attach(sandbox.id).exec("echo found").output == "found\n"
    sandbox.delete()
    with pytest.raises(docker.errors.NotFound):
        docker_backend.api.inspect_container(sandbox.id)


def test_spec_files_are_copied_in_not_mounted(make_sandbox, docker_backend):
    sandbox = make_sandbox(memory="256m", files={"/etc/pier-probe/conf": b"on"})
    assert sandbox.exec("cat /etc/pier-probe/conf").output == "on"
    assert inspect(docker_backend, sandbox)["HostConfig"]["Binds"] in (None, [])


def test_capabilities_follow_the_engine(docker_backend):
    caps = docker_backend.capabilities
    assert caps.network_off and caps.memory_limit and caps.cpu_limit and caps.pids_limit
    assert not caps.egress_allowlist and not caps.gpus
    # The driver's own quota, or the disk guard where pier can install it (root, this host).
    assert caps.disk_quota == (docker_backend.facts.disk_quota or docker_backend.disk_guard_missing is None)


def test_an_unpullable_image_says_to_check_docker_pull(docker_backend):
    source = SandboxSource(kind="image", name="x", image="pier-test/absent:never")
    with pytest.raises(ImageError, match="docker pull pier-test/absent:never"):
        docker_backend.ensure_image(source, lambda _: None, timeout=60)


def test_a_generated_dockerfile_is_built_once_and_reused(docker_backend, base_image, make_sandbox):
    recipe = generate_recipe(base_image, ["jq"], ["six"], ca_bundle=True)
    source = SandboxSource(
        kind="dockerfile", name="generated", dockerfile=recipe.dockerfile, files=recipe.files
    )
    lines: list[str] = []
    tag = docker_backend.ensure_image(source, lines.append, timeout=600)
    if "Using cached image" in lines[0]:  # built earlier: build it afresh, as a new process would
        docker_backend.api.remove_image(tag, force=True)
        docker_backend = DockerBackend(Settings())
        lines.clear()
        tag = docker_backend.ensure_image(source, lines.append, timeout=600)
    assert tag.startswith("pier-build/generated:")
    assert lines[0] == f"Building image {tag}" and any("Successfully tagged" in x for x in lines)
    labels = docker_backend.api.inspect_image(tag)["Config"]["Labels"]
    assert labels["pier.recipe"] == tag.rsplit(":", 1)[1] and "pier.created" in labels

    again: list[str] = []
    assert docker_backend.ensure_image(source, again.append, timeout=600) == tag
    assert again == [f"Using cached image {tag}"], "no build step ran the second time"

    sandbox = make_sandbox(image=tag, memory="256m")
    result = sandbox.exec("jq --version && python3 -c 'import six; print(six.__name__)' && uv --version")
    assert result.ok and "jq-" in result.output and "six" in result.output, result.output


def test_an_image_removed_after_its_lookup_is_prepared_again_at_create(docker_backend, base_image):
    """Lookups are remembered for a minute (one round trip less per run); an
    operator removing the image meanwhile must not fail the next run."""
    backend = DockerBackend(Settings())
    recipe = generate_recipe(base_image, ["jq"], ["six"], ca_bundle=True)
    dockerfile = recipe.dockerfile + "\nLABEL pier.test=removed-after-lookup\n"
    source = SandboxSource(kind="dockerfile", name="removed", dockerfile=dockerfile, files=recipe.files)
    tag = backend.ensure_image(source, lambda _: None, timeout=600)
    backend.api.remove_image(tag, force=True)
    assert backend.ensure_image(source, lambda _: None, timeout=600) == tag, "the remembered lookup"
    labels = {LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}"}
    sandbox = backend.create(SandboxSpec(image=tag, limits=Limits(memory="128m"), labels=labels))
    try:
        assert sandbox.exec("echo up").output.strip() == "up"
    finally:
        sandbox.delete()
    assert backend.image_exists(tag)


def test_sweep_removes_sandboxes_of_dead_owners_and_past_deadlines(make_sandbox, docker_backend):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = make_sandbox({LABEL_OWNER: owner_label(gone.pid)}, memory="64m")
    overdue = make_sandbox({LABEL_DEADLINE: str(int(time.time()) - 5)}, memory="64m")
    alive = make_sandbox(memory="64m")

    swept = {s.id: s.reason for s in sweep(docker_backend, lambda trajectory_id: "running")}
    assert "owner process" in swept[orphan.id] and "past its deadline" in swept[overdue.id]
    assert alive.id not in swept
    remaining = {s.id for s in docker_backend.list_sandboxes()}
    assert orphan.id not in remaining and overdue.id not in remaining and alive.id in remaining


def test_a_client_on_the_engines_unix_socket_reads_no_proxy_variables(docker_backend, monkeypatch):
    """requests reads the proxy variables on every call unless told not to; a
    Unix socket goes through no proxy, so pier's client does not ask (a third of
    a small engine call's CPU, measured)."""
    from pier.sandbox.docker.client import connect
    from pier.settings import Settings

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # a proxy that would refuse, were it used
    api = connect(Settings())
    assert api.base_url.startswith("http+docker://") and api.trust_env is False
    assert api.version()["ApiVersion"]  # the call went to the engine, not to the proxy


def test_the_disk_guard_finds_the_writable_layer_the_engine_reports(make_sandbox, docker_backend):
    """The disk guard reads a container's upper dir from the engine's layer
    database instead of an inspect; both must name the same folder."""
    from pier.sandbox.docker import diskguard

    sandbox = make_sandbox(memory="256m", network=False)
    driver = inspect(docker_backend, sandbox)["GraphDriver"]
    found = diskguard.upper_dir(docker_backend.facts.root_dir, sandbox.id)
    # Another storage driver has no such entry: the guard asks the engine then.
    assert found == (driver["Data"]["UpperDir"] if driver["Name"] == "overlay2" else None)
