"""The Docker backend on a real engine: sandboxes, execs, files, limits, images, sweep."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from pier.errors import ImageError, SandboxError
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
from pier.sandbox.dockerfile import generate_dockerfile
from pier.sandbox.sweeper import owner_label, sweep
from pier.sandbox.tarutil import tar_of_files

pytestmark = pytest.mark.integration

MakeSandbox = Callable[..., DockerSandbox]


@pytest.fixture
def make_sandbox(docker_backend: DockerBackend, base_image: str) -> Iterator[MakeSandbox]:
    """Creates sandboxes on the test image, each labelled with a fresh run id, and
    deletes them all at the end of the test."""
    made: list[DockerSandbox] = []

    def make(
        labels: dict[str, str] | None = None, image: str | None = None, **limits: object
    ) -> DockerSandbox:
        run_labels = {LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}", **(labels or {})}
        spec = SandboxSpec(image=image or base_image, limits=Limits(**limits), labels=run_labels)  # type: ignore[arg-type]
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
    run_id = inspect(docker_backend, sandbox)["Config"]["Labels"][LABEL_RUN]
    assert result.output == f"0 /app pier-{run_id}\noops\n"
    assert sandbox.exec(["cat", "/proc/1/cmdline"]).output.startswith("/sbin/docker-init")


def test_exec_env_workdir_and_clean_env(make_sandbox):
    sandbox = make_sandbox(memory="256m")
    assert sandbox.exec("echo $GREETING", env={"GREETING": "hi there"}).output == "hi there\n"
    assert sandbox.exec("pwd", workdir="/tmp").output == "/tmp\n"
    clean = sandbox.exec("env | sort", env={"ONLY": "1"}, clean_env=True)
    names = {line.split("=", 1)[0] for line in clean.output.splitlines()}
    assert {"ONLY", "PATH", "HOME", "LANG"} <= names
    assert "SSL_CERT_FILE" not in names and "HOSTNAME" not in names


# Prints a line, then waits (up to 2 minutes) for the test to answer it by
# creating /tmp/go, which the test does only once that line has reached it.
WAITS_FOR_AN_ANSWER = """echo line1; echo err1 >&2
for _ in $(seq 1200); do [ -e /tmp/go ] && break; sleep 0.1; done
if [ -e /tmp/go ]; then echo line2; else echo "no answer: line1 never arrived while I ran"; fi
echo err2 >&2"""


def test_output_lines_stream_in_order_before_the_command_ends(make_sandbox):
    sandbox = make_sandbox(memory="256m")
    seen: list[str] = []
    first = threading.Event()

    def on_line(line: str) -> None:
        seen.append(line)
        if line == "line1":
            first.set()

    def answer() -> None:
        if first.wait(300):
            sandbox.exec("touch /tmp/go")

    answering = threading.Thread(target=answer)
    answering.start()
    result = sandbox.exec(WAITS_FOR_AN_ANSWER, on_line=on_line)
    first.set()  # free the answering thread whatever happened
    answering.join()
    assert seen == ["line1", "err1", "line2", "err2"], seen
    assert result.output == "line1\nerr1\nline2\nerr2\n"


def test_a_timeout_kills_the_command_and_its_children(make_sandbox):
    sandbox = make_sandbox(memory="256m")
    started = time.monotonic()
    result = sandbox.exec("sleep 100 & (sleep 101 &) ; setsid sleep 102 & echo started; sleep 100", timeout=2)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code in (124, 137)
    assert result.output == "started\n"
    assert 2 <= elapsed < 100, "stopped at its time limit, not when the command ended"
    left = sandbox.exec("ps -eo args | grep '^sleep 10' || true").output
    assert left == "", f"processes survived the timeout: {left}"
    assert sandbox.exec("echo still usable").ok


def test_files_in_and_out(make_sandbox):
    sandbox = make_sandbox(memory="256m")
    sandbox.put_files("/app/new/deeper", {"a.txt": b"alpha", "sub/b.txt": b"beta"})
    assert sandbox.exec("cat /app/new/deeper/a.txt /app/new/deeper/sub/b.txt").output == "alphabeta"
    with tarfile.open(fileobj=io.BytesIO(b"".join(sandbox.get_archive("/app/new")))) as tar:
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert contents == {"new/deeper/a.txt": b"alpha", "new/deeper/sub/b.txt": b"beta"}
    sandbox.put_archive("/app/streamed", iter([tar_of_files({"c.txt": b"gamma"})]))
    assert sandbox.exec("cat /app/streamed/c.txt").output == "gamma"
    with pytest.raises(FileNotFoundError):
        sandbox.get_archive("/app/nothing-here")


def test_network_off_blocks_and_network_on_reaches_pypi(make_sandbox):
    curl = "curl -sS -m 20 -o /dev/null -w '%{http_code}' https://pypi.org/simple/six/"
    offline = make_sandbox(memory="256m", network=False)
    assert not offline.exec(curl, timeout=30).ok
    online = make_sandbox(memory="256m")
    result = online.exec(curl, timeout=30)
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


def test_out_of_memory_is_detected(make_sandbox):
    sandbox = make_sandbox(memory="64m")
    assert not sandbox.oom_killed()
    result = sandbox.exec('python3 -c "a = bytearray(200 * 1024 * 1024)"', timeout=60)
    assert result.exit_code == 137
    assert sandbox.oom_killed()


def test_delete_is_idempotent_and_the_sandbox_is_gone(make_sandbox, docker_backend):
    sandbox = make_sandbox(memory="256m")
    assert sandbox.id in {s.id for s in docker_backend.list_sandboxes()}
    assert docker_backend.sandbox(sandbox.id).exec("echo found").output == "found\n"
    sandbox.delete()
    sandbox.delete()
    docker_backend.remove(sandbox.id)
    assert sandbox.id not in {s.id for s in docker_backend.list_sandboxes()}
    with pytest.raises(SandboxError):
        sandbox.exec("true")
    with pytest.raises(SandboxError):
        docker_backend.sandbox(sandbox.id)


def test_creating_from_a_missing_image_is_a_sandbox_error(docker_backend):
    spec = SandboxSpec(image="pier-test/absent:never", limits=Limits(), labels={LABEL_RUN: "t"})
    with pytest.raises(SandboxError, match="absent"):
        docker_backend.create(spec)


def test_an_unpullable_image_says_to_check_docker_pull(docker_backend):
    source = SandboxSource(kind="image", name="x", image="pier-test/absent:never")
    with pytest.raises(ImageError, match="docker pull pier-test/absent:never"):
        docker_backend.ensure_image(source, lambda _: None, timeout=60)


def test_a_generated_dockerfile_is_built_once_and_reused(docker_backend, base_image, make_sandbox):
    dockerfile = generate_dockerfile(base_image, ["jq"], ["six"], ca_bundle=True)
    source = SandboxSource(kind="dockerfile", name="generated", dockerfile=dockerfile)
    lines: list[str] = []
    tag = docker_backend.ensure_image(source, lines.append, timeout=600)
    if "Using cached image" in lines[0]:  # built by an earlier session: build it afresh
        docker_backend.api.remove_image(tag)
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


def test_sweep_removes_sandboxes_of_dead_owners_and_past_deadlines(make_sandbox, docker_backend):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = make_sandbox({LABEL_OWNER: owner_label(gone.pid)}, memory="64m")
    overdue = make_sandbox({LABEL_DEADLINE: str(int(time.time()) - 5)}, memory="64m")
    alive = make_sandbox(memory="64m")

    swept = {s.id: s.reason for s in sweep(docker_backend, lambda run_id: "running")}
    assert "owner process" in swept[orphan.id] and "past its deadline" in swept[overdue.id]
    assert alive.id not in swept
    remaining = {s.id for s in docker_backend.list_sandboxes()}
    assert orphan.id not in remaining and overdue.id not in remaining and alive.id in remaining
