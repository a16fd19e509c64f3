"""What every sandbox backend must pass: one check per promise of the contract in
pier.sandbox.base, run on a real backend and an image it can start.

    from pier.sandbox.conformance import run_conformance
    for result in run_conformance(MyBackend(), image="my-image:tag"):
        print(result.status, result.name, result.detail)

Each capability's check runs one of two ways: declared, the backend must really
enforce it; not declared, the backend must refuse (hard ones) or note (soft
ones) a spec that asks for it (pier.sandbox.capabilities). Commands use paths relative to
their workdir and the image's shell tools (bash, coreutils, setsid), so any Linux
image with those passes. A check's sandboxes are deleted when it ends."""

from __future__ import annotations

import contextlib
import io
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pier.errors import CapabilityError, SandboxError
from pier.sandbox.base import LABEL_RUN, Limits, Sandbox, SandboxBackend, SandboxSpec
from pier.sandbox.tarutil import tar_of_files

Status = Literal["passed", "failed"]
DELETE_BOUND_S = 60.0  # the contract's "bounded in time", generously
LABEL_CHECK = "pier.conformance"
ALLOWED_HOST = "pypi.org"  # reachable where sandboxes may reach anything
OTHER_HOST = "files.pythonhosted.org"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "passed"


class ConformanceFailure(AssertionError):
    """A promise of the contract the backend did not keep."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise ConformanceFailure(message)


@dataclass
class Harness:
    """What a check works with: the backend, an image it can start, and make(),
    which creates sandboxes that are deleted when the check ends."""

    backend: SandboxBackend
    image: str
    made: list[Sandbox] = field(default_factory=list)

    def spec(self, *, labels: dict[str, str] | None = None, **fields: object) -> SandboxSpec:
        limits = {"cpus": 1.0, "memory": "256m", "pids": 256, "disk": None}
        limits.update({k: v for k, v in fields.items() if k in Limits.__dataclass_fields__})
        rest = {k: v for k, v in fields.items() if k not in Limits.__dataclass_fields__}
        run = f"conformance-{uuid.uuid4().hex[:12]}"
        return SandboxSpec(
            image=str(rest.pop("image", self.image)),
            limits=Limits(**limits),  # type: ignore[arg-type]
            labels={LABEL_RUN: run, LABEL_CHECK: "1", **(labels or {})},
            **rest,  # type: ignore[arg-type]
        )

    def make(self, *, labels: dict[str, str] | None = None, **fields: object) -> Sandbox:
        sandbox = self.backend.create(self.spec(labels=labels, **fields))
        self.made.append(sandbox)
        return sandbox

    def cleanup(self) -> list[str]:
        """Delete every sandbox made; what delete raised, though it must never raise."""
        errors = []
        for sandbox in self.made:
            try:
                sandbox.delete()
            except Exception as exc:
                errors.append(f"delete of {sandbox.id[:12]} raised {type(exc).__name__}: {exc}")
        return errors


CheckFn = Callable[[Harness], None]
CHECKS: dict[str, CheckFn] = {}


def check(fn: CheckFn) -> CheckFn:
    CHECKS[fn.__name__] = fn
    return fn


def run_check(name: str, backend: SandboxBackend, image: str) -> CheckResult:
    """One check's result; its sandboxes are deleted, pass or fail."""
    harness = Harness(backend, image)
    try:
        CHECKS[name](harness)
        result = CheckResult(name, "passed")
    except ConformanceFailure as exc:
        result = CheckResult(name, "failed", str(exc))
    except Exception as exc:  # an error is a broken promise too: report it, run the rest
        result = CheckResult(name, "failed", f"{type(exc).__name__}: {exc}")
    errors = harness.cleanup()
    if errors and result.ok:
        return CheckResult(name, "failed", "; ".join(errors))
    return result


def run_conformance(
    backend: SandboxBackend, image: str, *, only: Iterable[str] | None = None
) -> list[CheckResult]:
    """Every check (or those named in only), in order, on backend with image."""
    return [run_check(name, backend, image) for name in (only or CHECKS)]


def read_file(sandbox: Sandbox, path: str) -> bytes:
    """One file's content, through get_archive."""
    with tarfile.open(fileobj=io.BytesIO(b"".join(sandbox.get_archive(path)))) as tar:
        member = tar.next()
        expect(member is not None and member.isfile(), f"get_archive({path!r}) holds no file")
        handle = tar.extractfile(member)  # type: ignore[arg-type]
        assert handle is not None
        return handle.read()


# --- exec -------------------------------------------------------------------


@check
def exec_output_and_exit_code(h: Harness) -> None:
    """A string runs through bash; stdout and stderr arrive in the order written;
    a failed command is data, not an exception."""
    result = h.make().exec("echo out; echo err >&2; echo again; exit 3")
    expect(result.exit_code == 3 and not result.ok, f"exit code 3 expected, got {result}")
    expect(not result.timed_out, "a command that ended on its own is marked timed_out")
    expect(result.output == "out\nerr\nagain\n", f"output {result.output!r} is not out/err/again in order")


@check
def exec_argv_is_not_a_shell(h: Harness) -> None:
    """A list is an argv: no word splitting, no expansion."""
    result = h.make().exec(["printf", "%s|", "a b", "$HOME"])
    expect(result.output == "a b|$HOME|", f"argv was reinterpreted: {result.output!r}")


@check
def exec_env(h: Harness) -> None:
    """The spec's env reaches every command; a call's env adds to it and wins."""
    sandbox = h.make(env={"FROM_SPEC": "spec", "BOTH": "spec"})
    result = sandbox.exec('echo "$FROM_SPEC $BOTH $FROM_CALL"', env={"BOTH": "call", "FROM_CALL": "hi there"})
    expect(result.output == "spec call hi there\n", f"env not applied: {result.output!r}")


@check
def exec_workdir(h: Harness) -> None:
    """Commands start in /app unless workdir says otherwise; the workdir is the
    same place the file calls see."""
    sandbox = h.make()
    sandbox.put_files("/tmp/pier-wd", {"seed": b""})
    sandbox.exec("echo in-app > here")
    sandbox.exec("echo in-tmp > here", workdir="/tmp/pier-wd")
    expect(read_file(sandbox, "/app/here") == b"in-app\n", "the default workdir is not /app")
    expect(read_file(sandbox, "/tmp/pier-wd/here") == b"in-tmp\n", "workdir was not honoured")


@check
def exec_clean_env(h: Harness) -> None:
    """clean_env starts from nothing but PATH, HOME, LANG and the call's env."""
    sandbox = h.make(env={"FROM_SPEC": "1"})
    clean = sandbox.exec("env", env={"ONLY": "1"}, clean_env=True)
    names = {line.split("=", 1)[0] for line in clean.output.splitlines()}
    expect({"ONLY", "PATH", "HOME", "LANG"} <= names, f"clean env lacks the basics: {sorted(names)}")
    expect("FROM_SPEC" not in names, "clean_env kept the spec's env")
    expect("FROM_SPEC" in sandbox.exec("env").output, "without clean_env the spec's env is missing")


@check
def exec_streams_lines(h: Harness) -> None:
    """on_line gets each line while the command runs: here the command waits for a
    file that only the line callback creates."""
    sandbox = h.make()
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if line == "ready":
            sandbox.put_files("/app", {"go": b""})

    result = sandbox.exec(
        "echo ready; while [ ! -e go ]; do sleep 0.1; done; echo done", timeout=30, on_line=on_line
    )
    expect(not result.timed_out, "the first line reached on_line only after the command ended")
    expect(seen == ["ready", "done"] and result.output == "ready\ndone\n", f"lines {seen}, {result}")


@check
def exec_stdout_is_bytes_apart_from_stderr(h: Harness) -> None:
    """exec_stdout hands stdout on byte for byte (every byte value, no decoding,
    no stderr in it) in the workdir given; its result, once the stdout ended,
    has the exit code and the stderr."""
    sandbox = h.make()
    blob = bytes(range(256)) * 1024
    sandbox.put_files("/app/bin", {"blob": blob})
    with sandbox.exec_stdout(["bash", "-c", "cat blob; echo err >&2; exit 3"], workdir="/app/bin") as out:
        data = b"".join(out)
        result = out.result()
    expect(data == blob, f"stdout came back as {len(data)} bytes, not the {len(blob)} written")
    expect(result.exit_code == 3 and not result.timed_out, f"exit code 3 expected, got {result}")
    expect(result.output == "err\n", f"stderr {result.output!r} is not 'err'")


@check
def exec_stdout_timeout_and_close(h: Harness) -> None:
    """exec_stdout's command is killed at its time limit (timed_out), and when
    its stream is closed before its stdout ended; the sandbox stays usable."""
    sandbox = h.make()
    with sandbox.exec_stdout(["bash", "-c", "echo started; sleep 100"], workdir="/app", timeout=2) as out:
        data = b"".join(out)
        result = out.result()
    expect(data == b"started\n", f"stdout {data!r}")
    expect(result.timed_out and not result.ok, f"not marked timed out: {result}")
    expect(result.duration_s >= 2, f"stopped before its time limit ({result.duration_s:.1f}s)")
    tick = "while :; do echo x >> tick; echo line; sleep 0.05; done"
    with sandbox.exec_stdout(["bash", "-c", tick], workdir="/app") as out:
        expect(next(iter(out), b"").startswith(b"line"), "no first line from a command that writes lines")
    count = "wc -c < tick"
    later = sandbox.exec(f"before=$({count}); sleep 1; after=$({count}); echo $before $after", timeout=30)
    before, after = later.output.split()
    expect(before == after, f"the command went on after its stream was closed: tick grew {before} -> {after}")


@check
def timeout_kills_children(h: Harness) -> None:
    """On timeout every process the command started is killed (background ones,
    double-forked ones, those in a new session) and the sandbox stays usable."""
    sandbox = h.make()
    tick = "while :; do echo x >> {}; sleep 0.1; done"
    command = (
        f"({tick.format('a')}) & ( ({tick.format('b')}) & ) ; "
        f"setsid bash -c '{tick.format('c')}' & echo started; sleep 100"
    )
    result = sandbox.exec(command, timeout=2)
    expect(result.timed_out and not result.ok, f"not marked timed out: {result}")
    expect(result.output == "started\n", f"output {result.output!r}")
    expect(result.duration_s >= 2, f"stopped before its time limit ({result.duration_s:.1f}s)")
    count = "cat a b c 2>/dev/null | wc -c"
    later = sandbox.exec(f"before=$({count}); sleep 1; after=$({count}); echo $before $after", timeout=30)
    before, after = later.output.split()
    grew = f"the tick files grew from {before} to {after} bytes in 1 s after the exec returned"
    expect(before == after, f"processes survived the timeout: {grew} ({result})")
    expect(sandbox.exec("echo still usable").output == "still usable\n", "the sandbox broke after a timeout")


@check
def timeout_grace_terms_then_kills(h: Harness) -> None:
    """With a grace, the command's process group gets SIGTERM at the timeout: a
    trap then still runs (its file written, its output read) for up to the
    grace, and what ignores SIGTERM is KILLed when the grace is over."""
    sandbox = h.make()
    trapped = "trap 'sleep 1; echo wrapped-up > graced; echo in-grace; exit 3' TERM; echo started; sleep 100"
    # `sleep 100 & wait` so the shell's trap runs at once (a foreground child delays it)
    result = sandbox.exec(trapped.replace("sleep 100", "sleep 100 & wait"), timeout=2, grace=10)
    expect(result.timed_out and not result.ok, f"not marked timed out: {result}")
    expect("in-grace" in result.output, f"the trap's output in the grace was lost: {result.output!r}")
    expect(result.duration_s < 10, f"the exec waited out the whole grace ({result.duration_s:.1f}s)")
    got = sandbox.exec("cat graced", timeout=30).output
    expect(got == "wrapped-up\n", f"the file the trap wrote in the grace is missing: {got!r}")
    stubborn = "trap '' TERM; while :; do echo x >> tick; sleep 0.1; done"
    result = sandbox.exec(stubborn, timeout=1, grace=2)
    expect(result.timed_out, f"not marked timed out: {result}")
    expect(result.duration_s >= 3, f"killed before its grace was over ({result.duration_s:.1f}s)")
    later = sandbox.exec("before=$(wc -c < tick); sleep 1; after=$(wc -c < tick); echo $before $after")
    before, after = later.output.split()
    expect(before == after, f"a process that ignored SIGTERM outlived the grace: tick {before} -> {after}")


# --- files ------------------------------------------------------------------


@check
def pause_freezes_and_resume_thaws(h: Harness) -> None:
    """pause stops every process of the sandbox (a ticking loop stops ticking)
    and resume lets it go on (a backend that cannot pause says so)."""
    sandbox = h.make()
    sandbox.exec("nohup bash -c 'while :; do echo x >> tick; sleep 0.1; done' >/dev/null 2>&1 &", timeout=30)
    started = int(sandbox.exec("sleep 0.5; wc -l < tick").output.strip() or 0)
    expect(started > 0, "the ticking loop did not start")
    try:
        h.backend.pause(sandbox.id)
    except SandboxError as exc:
        expect("cannot pause" in str(exc), f"pause failed: {exc}")
        return
    expect(h.backend.paused(sandbox.id), "paused() is False after pause")
    time.sleep(2)  # ~20 ticks if it were not paused
    h.backend.resume(sandbox.id)
    expect(not h.backend.paused(sandbox.id), "paused() is True after resume")
    at_resume = int(sandbox.exec("wc -l < tick").output.strip() or 0)
    time.sleep(1)
    later = int(sandbox.exec("wc -l < tick").output.strip() or 0)
    expect(later > at_resume, f"nothing ticks after resume ({at_resume} -> {later})")
    expect(at_resume <= started + 7, f"it ticked while paused ({started} -> {at_resume} lines over 2 s)")


@check
def commit_saves_the_files(h: Harness) -> None:
    """commit saves a sandbox's files as an image that new sandboxes start with
    (a backend that cannot save one says so with SandboxError)."""
    sandbox = h.make()
    # relative paths: the fake's process mode runs commands on the host, in the sandbox's folder
    sandbox.exec("mkdir -p kept && echo saved > kept/file", workdir="/opt")
    sandbox.exec("echo app > kept.txt", workdir="/app")
    ref = f"pier-conformance-commit:{uuid.uuid4().hex[:12]}"
    try:
        h.backend.commit(sandbox.id, ref, {"pier.snapshot": "conformance"})
    except SandboxError as exc:
        expect("cannot save" in str(exc), f"commit failed: {exc}")
        return
    later = h.make(image=ref)
    try:
        got = later.exec("cat kept/file", workdir="/opt").output + later.exec("cat kept.txt").output
        expect(got == "saved\napp\n", f"a sandbox of the committed image lacks the files: {got!r}")
    finally:
        later.delete()  # before its image can go
        h.made.remove(later)  # deleted here: a second delete is delete_is_idempotent_and_bounded's question
        h.backend.remove_image(ref)


@check
def archives_in_and_out(h: Harness) -> None:
    """put_archive creates missing folders and takes a stream; get_archive gives a
    tar whose top entry is the path's basename."""
    sandbox = h.make()
    sandbox.put_files("/app/new/deeper", {"a.txt": b"alpha", "sub/b.txt": b"beta"})
    result = sandbox.exec("cat new/deeper/a.txt new/deeper/sub/b.txt")
    expect(result.output == "alphabeta", f"files put in read back as {result.output!r}")
    with tarfile.open(fileobj=io.BytesIO(b"".join(sandbox.get_archive("/app/new")))) as tar:
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    expected = {"new/deeper/a.txt": b"alpha", "new/deeper/sub/b.txt": b"beta"}
    expect(contents == expected, f"get_archive gave {contents}")
    sandbox.put_archive("/app/streamed", iter([tar_of_files({"c.txt": b"gamma"})]))
    sandbox.put_archive("/app/streamed", tar_of_files({"d.txt": b"delta"}))
    expect(sandbox.exec("cat streamed/c.txt streamed/d.txt").output == "gammadelta", "archives lost")
    expect(read_file(sandbox, "/app/streamed/d.txt") == b"delta", "a single file reads back wrong")


@check
def spec_files_are_in_place(h: Harness) -> None:
    """A spec's files are there when create returns."""
    sandbox = h.make(files={"/app/conf/settings.json": b"{}", "/tmp/seed.txt": b"seed"})
    expect(sandbox.exec("cat conf/settings.json").output == "{}", "spec file /app/conf/settings.json missing")
    expect(read_file(sandbox, "/tmp/seed.txt") == b"seed", "spec file /tmp/seed.txt missing")


@check
def missing_files(h: Harness) -> None:
    """get_archive of a path that does not exist raises FileNotFoundError."""
    sandbox = h.make()
    for path in ("/app/nothing-here", "/no/such/folder/file"):
        try:
            sandbox.get_archive(path)
        except FileNotFoundError:
            continue
        raise ConformanceFailure(f"get_archive({path!r}) did not raise FileNotFoundError")


# --- lifecycle --------------------------------------------------------------


@check
def listing_by_label(h: Harness) -> None:
    """list_sandboxes finds a sandbox with every label it was made with."""
    sandbox = h.make(labels={"pier.collection": "conformance"})
    found = {s.id: s for s in h.backend.list_sandboxes()}
    expect(sandbox.id in found, "a new sandbox is not listed")
    info = found[sandbox.id]
    labels = info.labels
    expect(labels.get("pier.collection") == "conformance", f"labels not kept: {dict(labels)}")
    expect(LABEL_RUN in labels and info.running, f"listed without its run label or not running: {info}")


@check
def attach_reopens_by_id(h: Harness) -> None:
    """attach(id) reaches the same sandbox; an unknown id raises SandboxError."""
    sandbox = h.make()
    sandbox.put_files("/app", {"mark": b"same"})
    again = h.backend.attach(sandbox.id)
    expect(again.id == sandbox.id, "attach returned another id")
    expect(again.exec("cat mark").output == "same", "attach reached another sandbox")
    try:
        h.backend.attach("pier-conformance-no-such-sandbox")
    except SandboxError:
        return
    raise ConformanceFailure("attach of an unknown id did not raise SandboxError")


@check
def delete_is_idempotent_and_bounded(h: Harness) -> None:
    """delete stops a busy sandbox within a bound, can be called again, never
    raises; afterwards the sandbox is unlisted and unreachable."""
    sandbox = h.make()
    ended = threading.Event()

    def busy() -> None:
        with contextlib.suppress(SandboxError):  # the sandbox went away under it: allowed
            sandbox.exec("sleep 1000", timeout=DELETE_BOUND_S * 2)
        ended.set()

    threading.Thread(target=busy, daemon=True).start()
    time.sleep(0.5)  # let the command start: deleting an idle sandbox is the easy case
    started = time.monotonic()
    sandbox.delete()
    took = time.monotonic() - started
    expect(took < DELETE_BOUND_S, f"delete took {took:.0f}s")
    expect(ended.wait(DELETE_BOUND_S), "a command kept running after its sandbox was deleted")
    sandbox.delete()
    h.backend.remove(sandbox.id)
    h.backend.remove("pier-conformance-no-such-sandbox")
    expect(sandbox.id not in {s.id for s in h.backend.list_sandboxes()}, "a deleted sandbox is listed")
    for what, call in (
        ("exec", lambda: sandbox.exec("true")),
        ("attach", lambda: h.backend.attach(sandbox.id)),
    ):
        try:
            call()
        except SandboxError:
            continue
        raise ConformanceFailure(f"{what} on a deleted sandbox did not raise SandboxError")


@check
def exec_stdout_ends_when_its_sandbox_is_deleted(h: Harness) -> None:
    """A command whose stdout is being read stops, and its stream ends, when its
    sandbox is deleted (within the delete bound), though it set no time limit:
    collect reads through such a stream, and a run cancelled meanwhile must end."""
    sandbox = h.make()
    ended = threading.Event()

    def read() -> None:
        command = ["bash", "-c", "echo started; sleep 1000"]
        # the sandbox going away under it may raise SandboxError: allowed
        with contextlib.suppress(SandboxError), sandbox.exec_stdout(command, workdir="/app") as out:
            for _chunk in out:
                pass
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    time.sleep(0.5)  # let the command start
    sandbox.delete()
    h.made.remove(sandbox)  # deleted here: a second delete is delete_is_idempotent_and_bounded's question
    expect(ended.wait(DELETE_BOUND_S), "a command's stdout stayed open after its sandbox was deleted")


@check
def missing_image_is_a_sandbox_error(h: Harness) -> None:
    """Creating from an image that is not there raises SandboxError, leaving nothing."""
    image = f"pier-conformance/absent-{uuid.uuid4().hex[:8]}:never"
    try:
        h.make(image=image)
    except SandboxError:
        return
    raise ConformanceFailure(f"create from {image} did not raise SandboxError")


# --- capabilities -----------------------------------------------------------


def _refused(h: Harness, capability: str, **fields: Any) -> None:
    """A backend without a hard capability refuses a spec that needs it, naming both."""
    try:
        h.make(**fields)
    except CapabilityError as exc:
        message = str(exc)
        expect(capability in message, f"the refusal does not name {capability}: {message}")
        expect(repr(h.backend.name) in message, f"the refusal does not name the backend: {message}")
        return
    raise ConformanceFailure(f"undeclared {capability}: a spec needing it was created, not refused")


# A note on a soft capability names the capability or, in words, the limit.
_NOTE_WORDS = {"cpu_limit": "cpu", "pids_limit": "process"}


def _noted(h: Harness, capability: str, **fields: Any) -> Sandbox:
    """A backend without a soft capability creates the sandbox and says so in a note."""
    sandbox = h.make(**fields)
    words = (capability, _NOTE_WORDS[capability])
    noted = any(word in note.lower() for note in sandbox.notes for word in words)
    expect(noted, f"undeclared {capability}, yet no note says the limit is not enforced: {sandbox.notes}")
    return sandbox


def _connects(sandbox: Sandbox, host: str) -> bool:
    result = sandbox.exec(f"exec 3<>/dev/tcp/{host}/443", timeout=20)
    return result.ok


@check
def capability_network_off(h: Harness) -> None:
    """Network off: no interface but loopback, and no connection out."""
    if not h.backend.capabilities.network_off:
        return _refused(h, "network_off", network=False)
    sandbox = h.make(network=False)
    interfaces = sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split()
    expect(interfaces == ["lo"], f"a sandbox without network has interfaces {interfaces}")
    expect(not _connects(sandbox, ALLOWED_HOST), f"a sandbox without network reached {ALLOWED_HOST}")
    return None


@check
def capability_egress_allowlist(h: Harness) -> None:
    """An egress allow-list lets the listed host through and nothing else."""
    if not h.backend.capabilities.egress_allowlist:
        return _refused(h, "egress_allowlist", egress=(ALLOWED_HOST,))
    sandbox = h.make(egress=(ALLOWED_HOST,))
    expect(_connects(sandbox, ALLOWED_HOST), f"the allowed {ALLOWED_HOST} is unreachable")
    expect(not _connects(sandbox, OTHER_HOST), f"{OTHER_HOST} is reachable though not allowed")
    return None


@check
def capability_memory_limit(h: Harness) -> None:
    """A memory ceiling: going past it kills the command, oom_killed() says so, and
    the sandbox stays usable."""
    if not h.backend.capabilities.memory_limit:
        return _refused(h, "memory_limit")
    sandbox = h.make(memory="64m")
    expect(not sandbox.oom_killed(), "a fresh sandbox reports an OOM kill")
    # tail keeps a line without newlines whole: 300 MB held in memory.
    result = sandbox.exec("head -c 300000000 /dev/zero | tail -n 1 > /dev/null", timeout=60)
    expect(not result.ok and not result.timed_out, f"300 MB under a 64 MB limit did not fail: {result}")
    expect(sandbox.oom_killed(), "oom_killed() is False after the command was killed for memory")
    expect(sandbox.exec("echo alive").ok, "the sandbox broke after an OOM kill")
    return None


@check
def capability_gpus(h: Harness) -> None:
    """GPUs asked for are visible to the command."""
    if not h.backend.capabilities.gpus:
        return _refused(h, "gpus", gpus=1)
    result = h.make(gpus=1).exec("nvidia-smi -L", timeout=60)
    expect(result.ok and "GPU" in result.output, f"no GPU visible: {result.output[-300:]}")
    return None


DISK_STOP_S = 10.0  # a sandbox past its disk limit is stopped within this


@check
def capability_disk_quota(h: Harness) -> None:
    """A disk limit holds wherever the sandbox writes: past it, writes are refused
    or the sandbox is stopped, within DISK_STOP_S limit_reached() names the limit,
    and exec then raises SandboxError. Undeclared, a spec with a disk limit is
    refused: a backend that only warns fails."""
    if not h.backend.capabilities.disk_quota:
        return _refused(h, "disk_quota", disk="64M")
    sandbox = h.make(disk="64M")
    expect(
        sandbox.limit_reached() is None, f"a fresh sandbox reports a limit reached: {sandbox.limit_reached()}"
    )
    wrote = []
    for folder in ("/tmp", "/app", "/var"):  # 150 MB in all, 50 MB in each, under a 64 MB limit
        try:
            result = sandbox.exec("head -c 50000000 /dev/zero > pier-fill", workdir=folder, timeout=120)
        except SandboxError:
            break  # stopped already
        wrote.append(result.ok)
    expect(not all(wrote) or len(wrote) < 3, "150 MB written under a 64 MB disk limit all succeeded")
    waited = time.monotonic()
    while sandbox.limit_reached() is None and time.monotonic() - waited < DISK_STOP_S:
        time.sleep(0.2)
    reason = sandbox.limit_reached()
    expect(
        reason is not None, f"limit_reached() still None {DISK_STOP_S:g} s after the disk limit was passed"
    )
    expect("64M" in str(reason), f"limit_reached() does not name the limit 64M: {reason}")
    try:
        sandbox.exec("true", timeout=30)
    except SandboxError as exc:
        expect("64M" in str(exc), f"exec after the disk limit raised without naming it: {exc}")
        return None
    raise ConformanceFailure("exec still runs in a sandbox stopped for its disk limit")


@check
def capability_cpu_limit(h: Harness) -> None:
    """A CPU limit is applied (never above what was asked); else noted."""
    if not h.backend.capabilities.cpu_limit:
        _noted(h, "cpu_limit", cpus=1.5)
        return
    sandbox = h.make(cpus=1.5)
    applied = sandbox.applied.cpus if sandbox.applied else None
    expect(applied is not None and 0 < applied <= 1.5, f"applied CPUs {applied} for 1.5 asked")


@check
def capability_pids_limit(h: Harness) -> None:
    """A process limit stops forks past it; else noted."""
    if not h.backend.capabilities.pids_limit:
        _noted(h, "pids_limit", pids=64)
        return
    sandbox = h.make(pids=64)
    result = sandbox.exec("timeout 15 bash -c 'for i in $(seq 100); do sleep 60 & done; echo all-started'")
    expect("all-started" not in result.output, "100 processes started under a limit of 64")
