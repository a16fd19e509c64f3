"""The fake backend's own behaviour: scripted commands, the folder behind each
sandbox, labels, images."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.support.waits import wait_for

from pier.errors import SandboxError
from pier.sandbox.base import LABEL_OWNER, LABEL_RUN, Limits, SandboxSource, SandboxSpec
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine, Script, replied
from pier.sandbox.owner import owner_label
from pier.sandbox.sweeper import sweep


def spec(**fields: object) -> SandboxSpec:
    return SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels={LABEL_RUN: "r1"}, **fields)  # type: ignore[arg-type]


def test_scripted_commands_never_run_and_the_first_match_answers(tmp_path):
    script = (
        Script(otherwise=replied("unscripted", 9)).on(r"^echo", replied("scripted\n")).on(r".", replied("x"))
    )
    sandbox = FakeBackend(engine=FakeEngine(), program=script).create(spec())
    lines: list[str] = []
    assert sandbox.exec(f"echo hi > {tmp_path}/touched", on_line=lines.append).output == "scripted\n"
    assert not (tmp_path / "touched").exists() and lines == ["scripted"]
    assert sandbox.exec(["ls"]).output == "x"
    assert [c.text for c in script.calls] == [f"echo hi > {tmp_path}/touched", "ls"]
    assert FakeBackend(engine=FakeEngine(), program=Script(otherwise=replied("no", 9))).create(spec()).exec(
        "true"
    ) == replied("no", 9)


def test_unscripted_commands_succeed_silently_by_default():
    sandbox = FakeBackend(engine=FakeEngine()).create(spec())
    assert sandbox.exec("exit 3").ok  # answered, not run: safe for the lifecycle's own commands


def test_files_round_trip_and_cannot_leave_the_sandbox():
    backend = FakeBackend(engine=FakeEngine())
    sandbox = backend.create(spec(files={"/app/a/b.txt": b"bee"}))
    assert sandbox.host_path("/app/a/b.txt").read_bytes() == b"bee"
    with pytest.raises(SandboxError, match="leaves the sandbox"):
        sandbox.get_archive("/app/../../etc/passwd")
    sandbox.delete()
    assert not sandbox.folder.exists()


def test_labels_owner_and_images():
    backend = FakeBackend(engine=FakeEngine())
    sandbox = backend.create(spec())
    (info,) = backend.list_sandboxes()
    assert info.labels[LABEL_RUN] == "r1" and info.labels[LABEL_OWNER] == owner_label()
    lines: list[str] = []
    ref = backend.ensure_image(SandboxSource(kind="image", name="x", image="acme/tool:1"), lines.append, 10)
    assert ref == "acme/tool:1" and backend.image_exists(ref) and lines == ["Pulling image acme/tool:1"]
    with pytest.raises(SandboxError, match="no such image"):
        backend.create(SandboxSpec(image="absent:1", limits=Limits(), labels={}))
    assert backend.attach(sandbox.id) is sandbox


def test_the_sweeper_reaps_fake_sandboxes_of_dead_owners():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    backend = FakeBackend(engine=FakeEngine())
    orphan = backend.create(SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels={
        LABEL_RUN: "gone", LABEL_OWNER: owner_label(dead.pid)}))  # fmt: skip
    alive = backend.create(spec())
    swept = sweep(backend, lambda trajectory_id: "running")
    assert [s.id for s in swept] == [orphan.id]
    assert [s.id for s in backend.list_sandboxes()] == [alive.id]


def test_put_files_is_one_archive_at_the_root_naming_whole_paths(monkeypatch):
    """A folder that does not exist yet costs no extra round trip (a failed put,
    then a mkdir exec): the archive goes to /, which always exists, and the
    engine makes the missing folders."""
    import io
    import tarfile

    from pier.sandbox.base import Limits, SandboxSpec
    from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine, FakeSandbox

    sent: list[tuple[str, list[str]]] = []
    original = FakeSandbox.put_archive

    def record(self, dest_dir, tar_bytes):
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
            sent.append((dest_dir, tar.getnames()))
        return original(self, dest_dir, tar_bytes)

    monkeypatch.setattr(FakeSandbox, "put_archive", record)
    backend = FakeBackend(engine=FakeEngine())
    sandbox = backend.create(SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels={}))
    try:
        sandbox.put_files("/etc/pier", {"ca.crt": b"x", "sub/b.txt": b"y"})
        assert sent == [("/", ["etc/pier/ca.crt", "etc/pier/sub/b.txt"])]
        assert sandbox.host_path("/etc/pier/sub/b.txt").read_bytes() == b"y"
    finally:
        sandbox.delete()


def test_what_a_command_left_running_goes_with_the_sandbox():
    """A background loop an exec started (nohup, `&`) outlives the exec but not
    the sandbox: the conformance suite's pause check left such loops running on
    the host, each starting ten processes a second, for the rest of a test run."""
    from pier.sandbox.fakeproc import marked_by_any

    backend = FakeBackend(engine=FakeEngine(), processes=True)
    sandbox = backend.create(spec())
    done = sandbox.exec("nohup bash -c 'while :; do sleep 0.1; done' >/dev/null 2>&1 &", timeout=30)
    assert done.ok, done.output
    markers = set(sandbox._markers)
    # The loop's process is read from /proc, which can miss it for a moment (its
    # environ reads empty while it execs): on a loaded machine this failed once.
    wait_for(lambda: marked_by_any(markers), 5, "the loop did not start", interval=0.05)
    sandbox.delete()
    assert marked_by_any(markers) == []
