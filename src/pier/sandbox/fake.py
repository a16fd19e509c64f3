"""An in-process sandbox backend for tests: the lifecycle's unit tests and
orchestration tests that need thousands of sandboxes and no Docker.

Sandboxes live in a FakeEngine (what a Docker engine is to DockerBackend): a
folder per sandbox for its files, labels, images. A command does one of two
things, chosen when the backend is made:

- scripted (the default, and what PIER_SANDBOX_BACKEND=fake gives): a Script
  answers it. Nothing runs on the host, so the lifecycle's own commands (which
  name absolute paths and stop processes) are safe to send here.
- rated (`RatedAgent`, PIER_SANDBOX_BACKEND=fake-rated): the script agent's
  command succeeds with the probability its rendered script names
  (`pier-fake-success-rate=0.7`, e.g. from a runbook variable), so an
  experiment's cells can each be given a success rate and its figures checked
  against them, with no Docker and nothing run.
- process mode (processes=True): it runs as a real host process in the
  sandbox's folder (pier.sandbox.fakeproc). That is what the conformance suite
  checks; it is not isolation, so only commands written for it belong there.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import random
import re
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pier.errors import SandboxError
from pier.limits import parse_size
from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_OWNER,
    LABEL_RUN,
    Capabilities,
    ExecResult,
    LineSink,
    Sandbox,
    SandboxBackend,
    SandboxInfo,
    SandboxSource,
    SandboxSpec,
    StdoutStream,
)
from pier.sandbox.capabilities import refuse_unsupported, unenforced_notes
from pier.sandbox.dockerfile import recipe_tag
from pier.sandbox.fakeproc import (
    ExecCall,
    Killer,
    kill_marked,
    kill_marked_all,
    new_marker,
    process_env,
    run_process,
    stream_process,
)
from pier.sandbox.owner import owner_label
from pier.settings import Settings

FAKE_IMAGE = "pier-fake:latest"
# Folders a fresh sandbox has, as in a container made from a Debian image.
BASE_DIRS = ("app", "tmp", "root")

Reply = ExecResult | Callable[["FakeSandbox", ExecCall], ExecResult | None] | None
Program = Callable[["FakeSandbox", ExecCall], ExecResult | None]


def _memory_bytes(size: str) -> int:
    from pier.sandbox.docker.containers import parse_size  # one reading of sizes for every backend

    return parse_size(size)


@dataclass
class Script:
    """Answers commands by pattern (re.search on the command text), first match
    wins; `otherwise` answers the rest (default: exit 0, no output). A reply is an
    ExecResult or a function of (sandbox, call) that can also change the
    sandbox (put_files) and return None to mean "exit 0, no output". Every call is
    kept in `calls`, in order."""

    rules: list[tuple[re.Pattern[str], Reply]] = field(default_factory=list)
    otherwise: Reply = None
    calls: list[ExecCall] = field(default_factory=list)

    def on(self, pattern: str, reply: Reply = None) -> Script:
        self.rules.append((re.compile(pattern), reply))
        return self

    def __call__(self, sandbox: FakeSandbox, call: ExecCall) -> ExecResult:
        self.calls.append(call)
        reply = next((r for p, r in self.rules if p.search(call.text)), self.otherwise)
        if callable(reply):
            reply = reply(sandbox, call)
        return reply if isinstance(reply, ExecResult) else ExecResult(0, "", 0.0)


RATE = re.compile(r"pier-fake-success-rate=([0-9]*\.?[0-9]+)")
# Where the script agent's launch writes its script (pier.agents.script.SCRIPT_PATH).
AGENT_SCRIPT = "/run/pier/script.sh"


@dataclass
class RatedAgent:
    """A Program for the script agent: its command exits 0 (writing
    results/out.txt) with the probability `pier-fake-success-rate=R` in its
    script names, else 1; the draw is seeded by the run's id, so a run always
    ends the same way. Other commands answer as `otherwise` does."""

    otherwise: Program = field(default_factory=Script)
    seed: str = ""

    def __call__(self, sandbox: FakeSandbox, call: ExecCall) -> ExecResult | None:
        if "script.sh" not in call.text:
            return self.otherwise(sandbox, call)
        path = sandbox.host_path(AGENT_SCRIPT)
        found = RATE.search(path.read_text(errors="replace")) if path.is_file() else None
        rate = float(found.group(1)) if found else 1.0
        draw = random.Random(f"{self.seed}:{sandbox.labels.get(LABEL_RUN, sandbox.id)}").random()
        succeeded = draw < rate
        output = f"pier-fake: {'succeeded' if succeeded else 'failed as scripted'} (rate {rate:g})\n"
        sandbox.put_files("/logs/agent", {"agent.log": output.encode()})  # as the agent's tee writes it
        if succeeded:
            sandbox.put_files("/app/results", {"out.txt": b"done\n"})
        return replied(output, exit_code=0 if succeeded else 1)


def rated_backend(settings: Settings | None = None) -> FakeBackend:
    """PIER_SANDBOX_BACKEND=fake-rated: the scripted fake with a RatedAgent."""
    return FakeBackend(settings, program=RatedAgent())


def replied(output: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(exit_code=exit_code, output=output, duration_s=0.0)


class FakeEngine:
    """Where fake sandboxes and images live; one per process unless a test makes
    its own. Thread-safe; folders under a temporary root removed at exit."""

    def __init__(self, images: Sequence[str] = (FAKE_IMAGE,)):
        self.images: set[str] = set(images)
        self.image_files: dict[str, Path] = {}  # what a committed image's sandboxes start with
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.lock = threading.Lock()
        self._root: Path | None = None

    @property
    def root(self) -> Path:
        with self.lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="pier-fake-"))
                atexit.register(shutil.rmtree, self._root, True)
            return self._root


_default_engine = FakeEngine()


def _size_of(folder: Path) -> int:
    """Bytes in the files under folder (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


class FakeSandbox(Sandbox):
    # How a command that ran past its limit is stopped; a test can swap in a
    # weaker one to see the conformance suite catch it.
    kill_on_stop: Killer = staticmethod(kill_marked)

    def __init__(self, backend: FakeBackend, spec: SandboxSpec, labels: Mapping[str, str]):
        self.id = uuid.uuid4().hex + uuid.uuid4().hex
        self.spec = spec
        self.labels = dict(labels)
        self.folder = backend.engine.root / self.id
        self.oom = False
        self.deleted = False
        self.reached: str | None = None  # the disk limit, once it was reached
        self.frozen = False  # paused: exec refuses until resumed
        self._backend = backend
        self._markers: set[str] = set()
        self._reading: str | None = None

    def __repr__(self) -> str:
        return f"FakeSandbox({self.id[:12]})"

    def host_path(self, path: str) -> Path:
        """Where a sandbox path lives on this host. Raises SandboxError past the root."""
        parts = [p for p in PurePosixPath("/", path).parts[1:] if p not in ("", ".")]
        if ".." in parts:
            raise SandboxError(f"sandbox {self.id[:12]}: {path} leaves the sandbox")
        return self.folder.joinpath(*parts)

    def _alive(self) -> None:
        if self.frozen:
            raise SandboxError(f"sandbox {self.id[:12]} is paused: resume it first")
        if self.deleted:
            raise SandboxError(f"sandbox {self.id[:12]} is gone (deleted)")
        if self.limit_reached():
            raise SandboxError(str(self.reached))

    def limit_reached(self) -> str | None:
        """The disk limit, sampled: the folder's size measured when asked (a test
        double; nothing stops a write past it on the way)."""
        limit = self.spec.limits.disk
        if self.reached is None and limit and not self.deleted and _size_of(self.folder) > parse_size(limit):
            self.reached = f"the sandbox filled its disk limit of {limit} and was stopped"
            kill_marked_all(self._markers)
        return self.reached

    def exec(
        self,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str = "/app",
        timeout: float | None = None,
        on_line: LineSink | None = None,
        clean_env: bool = False,
        grace: float | None = None,
    ) -> ExecResult:
        self._alive()
        call = ExecCall(command, dict(env or {}), workdir, timeout, clean_env, grace)
        if not self._backend.processes:
            result = self._backend.program(self, call) or replied()
            for line in result.output.splitlines():
                if on_line:
                    on_line(line)
            return result
        return self._run(call, on_line)

    def _run(self, call: ExecCall, on_line: LineSink | None) -> ExecResult:
        cwd = self.host_path(call.workdir)
        cwd.mkdir(parents=True, exist_ok=True)
        marker = new_marker()
        # Kept for the sandbox's life: what the command left running in the
        # background (`cmd &`, nohup) carries it, and goes with the sandbox.
        self._markers.add(marker)
        env = process_env(call, self.spec.env, self.host_path("/root"), marker)
        outcome = run_process(
            call,
            cwd=cwd,
            env=env,
            memory_bytes=_memory_bytes(self.spec.limits.memory),
            on_line=on_line,
            kill=self.kill_on_stop,
        )
        self.oom = self.oom or outcome.oom
        self._alive()
        return outcome.result

    def exec_stdout(
        self, argv: Sequence[str], *, workdir: str = "/", timeout: float | None = None
    ) -> StdoutStream:
        """Scripted, the program's reply is the command's stdout (as UTF-8) and
        its exit code, with no stderr; in process mode a host process runs."""
        self._alive()
        call = ExecCall(list(argv), {}, workdir, timeout, False)
        if self._backend.processes:
            cwd = self.host_path(workdir)
            cwd.mkdir(parents=True, exist_ok=True)
            marker = new_marker()
            # Killed with the sandbox (delete, its disk limit), as exec's are. Kept
            # after the stream ends: killing what carries it then kills nothing.
            self._markers.add(marker)
            env = process_env(call, self.spec.env, self.host_path("/root"), marker)
            return stream_process(call, cwd=cwd, env=env, kill=self.kill_on_stop)
        reply = self._backend.program(self, call) or replied()
        return StdoutStream(
            iter([reply.output.encode()] if reply.output else []),
            lambda: ExecResult(reply.exit_code, "", reply.duration_s, reply.timed_out),
            lambda: None,
        )

    def put_archive(self, dest_dir: str, tar_bytes: bytes | Iterable[bytes]) -> None:
        self._alive()
        data = tar_bytes if isinstance(tar_bytes, bytes) else b"".join(tar_bytes)
        dest = self.host_path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(dest, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise SandboxError(f"sandbox {self.id[:12]}: copying files into {dest_dir}: {exc}") from exc

    def get_archive(self, path: str) -> Iterator[bytes]:
        """As the Docker engine does, the sandbox stays locked while an archive
        of it is being read: there a second get_archive before the first stream
        is read to its end (or closed) waits for ever; here it fails at once."""
        self._alive()
        if self._reading is not None:
            raise SandboxError(
                f"sandbox {self.id[:12]}: get_archive({path}) while the archive of {self._reading} is still "
                "being read (an engine would wait for ever): read or close one stream before asking for the next"
            )
        source = self.host_path(path)
        if not source.exists():
            raise FileNotFoundError(f"{path} does not exist in the sandbox")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(source, arcname=PurePosixPath(path).name or "/")
        self._reading = path
        return self._stream(buf.getvalue())

    def _stream(self, data: bytes) -> Iterator[bytes]:
        try:
            yield data
        finally:
            self._reading = None

    def oom_killed(self) -> bool:
        self._alive()
        return self.oom

    def delete(self) -> None:
        self._backend.remove(self.id)

    def stop(self) -> None:
        """What removing it does: no more calls, its processes killed, files gone."""
        self.deleted = True
        kill_marked_all(self._markers)
        shutil.rmtree(self.folder, ignore_errors=True)


class FakeBackend(SandboxBackend):
    """The fake as a SandboxBackend. In process mode it enforces a memory ceiling
    (by sampling, see fakeproc) and no other; scripted, it declares the same, so
    specs that pass here pass on Docker too."""

    name = "fake"
    sandbox_class: type[FakeSandbox] = FakeSandbox

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        engine: FakeEngine | None = None,
        program: Program | None = None,
        processes: bool = False,
        capabilities: Capabilities | None = None,
    ):
        self.engine = engine or _default_engine
        self.program: Program = program or Script()
        self.processes = processes
        self.capabilities = capabilities or Capabilities(memory_limit=True, disk_quota=True)

    def ping(self, timeout: float | None = None) -> None:
        return None

    def image_exists(self, ref: str) -> bool:
        return ref in self.engine.images

    def ensure_image(self, source: SandboxSource, log: LineSink, timeout: float) -> str:
        ref = source.image or recipe_tag(source.name, source.dockerfile or "", None, source.files)
        if ref in self.engine.images:
            log(f"Using cached image {ref}")
        else:
            log(f"{'Pulling' if source.image else 'Building'} image {ref}")
            self.engine.images.add(ref)
        return ref

    def create(self, spec: SandboxSpec) -> FakeSandbox:
        refuse_unsupported(spec, self.capabilities, self.name)
        if spec.image not in self.engine.images:
            raise SandboxError(f"creating a sandbox from {spec.image}: no such image in the fake engine")
        labels = {LABEL_OWNER: owner_label(), LABEL_CREATED: str(int(time.time())), **spec.labels}
        sandbox = self.sandbox_class(self, spec, labels)
        notes = unenforced_notes(spec, self.capabilities, self.name)
        sandbox.applied = spec.limits
        sandbox.notes = notes
        saved = self.engine.image_files.get(spec.image)
        if saved is not None:
            shutil.copytree(saved, sandbox.folder, symlinks=True, dirs_exist_ok=True)
        for name in BASE_DIRS:
            sandbox.host_path(name).mkdir(parents=True, exist_ok=True)
        with self.engine.lock:
            self.engine.sandboxes[sandbox.id] = sandbox
        try:
            sandbox.put_spec_files(spec.files)
        except BaseException:
            sandbox.delete()
            raise
        return sandbox

    def commit(self, sandbox_id: str, ref: str, labels: Mapping[str, str]) -> str:
        sandbox = self.attach(sandbox_id)
        sandbox._alive()
        saved = self.engine.root / "images" / uuid.uuid4().hex
        shutil.copytree(sandbox.folder, saved, symlinks=True)
        with self.engine.lock:
            self.engine.images.add(ref)
            self.engine.image_files[ref] = saved
        return ref

    def pause(self, sandbox_id: str) -> None:
        if self.processes:  # its commands are host processes, which it does not freeze
            raise SandboxError("the fake backend cannot pause a sandbox whose commands are host processes")
        self.attach(sandbox_id).frozen = True

    def resume(self, sandbox_id: str) -> None:
        self.attach(sandbox_id).frozen = False

    def paused(self, sandbox_id: str) -> bool:
        with self.engine.lock:
            found = self.engine.sandboxes.get(sandbox_id)
        return bool(found and found.frozen)

    def remove_image(self, ref: str) -> bool:
        with self.engine.lock:
            saved = self.engine.image_files.pop(ref, None)
            if ref not in self.engine.images or saved is None:
                return False
            self.engine.images.discard(ref)
        shutil.rmtree(saved, ignore_errors=True)
        return True

    def attach(self, sandbox_id: str) -> FakeSandbox:
        with self.engine.lock:
            found = self.engine.sandboxes.get(sandbox_id)
        if found is None:
            raise SandboxError(f"sandbox {sandbox_id[:12]} does not exist (or was deleted)")
        return found

    def list_sandboxes(self) -> list[SandboxInfo]:
        with self.engine.lock:
            found = list(self.engine.sandboxes.values())
        return [SandboxInfo(id=s.id, labels=dict(s.labels), running=True) for s in found]

    def remove(self, sandbox_id: str) -> None:
        with self.engine.lock:
            sandbox = self.engine.sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return
        sandbox.stop()
