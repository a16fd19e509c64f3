"""One Docker container as a pier Sandbox."""

from __future__ import annotations

import itertools
import logging
import re
import tarfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import docker
import docker.errors

from pier.errors import SandboxError
from pier.sandbox.base import ExecResult, LineSink, Sandbox, StdoutStream
from pier.sandbox.docker import diskguard
from pier.sandbox.docker.client import docker_errors
from pier.sandbox.docker.containers import container_state, remove_container
from pier.sandbox.docker.diskguard import DiskWatch
from pier.sandbox.docker.execs import exec_untar, run_exec, stream_exec
from pier.sandbox.docker.keepalive import NO_TAR, ChannelClosed, send_on_stdin
from pier.sandbox.docker.oomwatch import OomWatch
from pier.sandbox.tarutil import tar_members

log = logging.getLogger(__name__)

# cgroup v1 memory.oom_control and v2 memory.events both count "oom_kill N".
OOM_FILES = "/sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events"
_OOM_KILL = re.compile(r"^oom_kill (\d+)$", re.MULTILINE)


class DockerSandbox(Sandbox):
    """A container. The files create places (the CA bundle, a spec's files) wait as
    tar members until something could see them: they ride in front of the first
    archive sent to / (set up's), or go alone before the first exec or read. One
    archive round trip per run instead of two; nothing in the sandbox runs or is
    read before they are in place."""

    def __init__(
        self,
        api: docker.APIClient,
        container_id: str,
        engine_url: str,
        disks: DiskWatch | None = None,
        disk_root: Path | None = None,
        *,
        files_by_exec: bool = False,
        oom: OomWatch | None = None,
        stdin_fresh: bool = False,
    ):
        self.id = container_id
        self._api = api
        self._url = engine_url
        self._disks = disks
        self._disk_root = disk_root
        # gVisor caches the root filesystem as if nothing outside changed it (a
        # name looked up once and missing stays missing): files go in from inside.
        self._files_by_exec = files_by_exec
        self._oom = oom  # pier's OOM killer, where it kills instead of the kernel (gVisor)
        self._pending = b""  # tar members not yet sent
        self._pending_lock = threading.Lock()
        # Made by this process, its keep-alive still waiting on stdin: the first
        # archive into / goes there (keepalive.py). A sandbox found by its id
        # (attach) says False: its first run's set-up used the channel.
        self._stdin_fresh = stdin_fresh

    def defer_files(self, files: Mapping[str, bytes]) -> None:
        """Place files (absolute path -> content) with the next archive or before the
        next exec or read, whichever comes first."""
        with self._pending_lock:
            self._pending += tar_members({path.lstrip("/"): data for path, data in files.items()})

    def _take_pending(self) -> bytes:
        with self._pending_lock:
            pending, self._pending = self._pending, b""
        return pending

    def _flush(self) -> None:
        pending = self._take_pending()
        if pending or self._stdin_fresh:  # nothing runs while the keep-alive still waits on stdin
            self._send("/", pending + b"\0" * (2 * tarfile.BLOCKSIZE))

    def _send(self, dest_dir: str, tar_bytes: bytes | Iterator[bytes] | Iterable[bytes]) -> None:
        """One archive into dest_dir (which exists, or is made when going in from inside)."""
        if dest_dir == "/" and self._stdin_fresh and self._send_on_stdin(tar_bytes):
            return
        with self._errors(f"copying files into {dest_dir}"):
            if not self._files_by_exec:
                self._api.put_archive(self.id, dest_dir, tar_bytes)
                return
            chunks = [tar_bytes] if isinstance(tar_bytes, bytes) else tar_bytes
            try:
                exec_untar(self._api, self.id, dest_dir, chunks)
            except RuntimeError as exc:
                raise SandboxError(f"sandbox {self.id[:12]}: {exc}") from exc

    def _send_on_stdin(self, tar_bytes: bytes | Iterator[bytes] | Iterable[bytes]) -> bool:
        """The archive through the keep-alive's stdin: True when it is placed, False
        when it must go the engine's way (the image has no tar, or the channel
        failed before sending anything that cannot be sent again)."""
        self._stdin_fresh = False
        with self._errors("reading its state"):
            running = container_state(self._api, self.id).get("Running")
        if not running:  # an attach to a stopped container waits for it to start again
            return False
        chunks = [tar_bytes] if isinstance(tar_bytes, bytes) else tar_bytes
        try:
            status, messages = send_on_stdin(self._api, self.id, chunks)
        except ChannelClosed as exc:
            if isinstance(tar_bytes, Iterator):  # a generator was read: it cannot go again
                raise SandboxError(f"sandbox {self.id[:12]}: copying files into /: {exc}") from exc
            log.debug("sandbox %s: %s; the engine's archive call instead", self.id[:12], exc)
            return False
        if status == NO_TAR:
            return False
        if status != "0":
            raise SandboxError(f"sandbox {self.id[:12]}: tar -x into / exited {status}: {messages[-500:]}")
        return True

    def __repr__(self) -> str:
        return f"DockerSandbox({self.id[:12]})"

    def _errors(self, what: str) -> AbstractContextManager[None]:
        return docker_errors(f"sandbox {self.id[:12]}: {what}", self._url)

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
        self._refuse_if_stopped()
        self._flush()
        try:
            with self._errors("running a command"):
                result = run_exec(
                    self._api,
                    self.id,
                    command,
                    env=env,
                    workdir=workdir,
                    timeout=timeout,
                    on_line=on_line,
                    clean_env=clean_env,
                    grace=grace,
                )
        except SandboxError as exc:
            self._refuse_if_stopped()  # stopped under the command: say why
            self._refuse_if_ended(exc)
            raise
        self._refuse_if_stopped()
        return result

    def exec_stdout(
        self, argv: Sequence[str], *, workdir: str = "/", timeout: float | None = None
    ) -> StdoutStream:
        self._refuse_if_stopped()
        self._flush()
        return stream_exec(
            self._api,
            self.id,
            argv,
            workdir=workdir,
            timeout=timeout,
            errors=lambda: self._errors("reading a command's output"),
        )

    def limit_reached(self) -> str | None:
        disk = self._disks.get(self.id) if self._disks else None
        return self._disks.check(disk) if self._disks and disk else None

    def _refuse_if_stopped(self) -> None:
        reason = self.limit_reached()
        if reason:
            raise SandboxError(reason)

    def _refuse_if_ended(self, exc: SandboxError) -> None:
        """The engine refused a command because the sandbox is no longer running:
        say how it ended, which "is not running" alone does not."""
        cause = exc.__cause__
        if not (isinstance(cause, docker.errors.APIError) and cause.status_code == 409):
            return
        try:
            state = container_state(self._api, self.id)
        except Exception:  # gone meanwhile: the engine's own words stand
            return
        if state.get("Running"):
            return
        how = f"its main process exited with code {state.get('ExitCode')} at {state.get('FinishedAt')}"
        if state.get("OOMKilled"):
            how += ", killed for memory"
        raise SandboxError(f"sandbox {self.id[:12]} stopped under the run ({how}): {exc}") from exc

    def put_archive(self, dest_dir: str, tar_bytes: bytes | Iterable[bytes]) -> None:
        root = dest_dir.rstrip("/") == ""  # always exists: one round trip, bytes or stream
        if root:
            pending = self._take_pending()
            if pending:  # create's files go in front, in the same archive
                tar_bytes = _after(pending, tar_bytes)
            self._send("/", tar_bytes)
            return
        self._flush()
        if self._files_by_exec:  # tar makes the folder first
            self._send(dest_dir, tar_bytes)
            return
        if isinstance(tar_bytes, bytes) and self._put_if_folder_exists(dest_dir, tar_bytes):
            return
        # The folder is missing, or the tar is a stream, which cannot be sent twice.
        self._mkdir(dest_dir)
        with self._errors(f"copying files into {dest_dir}"):
            self._api.put_archive(self.id, dest_dir, tar_bytes)

    def _put_if_folder_exists(self, dest_dir: str, tar_bytes: bytes) -> bool:
        with self._errors(f"copying files into {dest_dir}"):
            try:
                self._api.put_archive(self.id, dest_dir, tar_bytes)
            except docker.errors.NotFound as exc:
                if _container_missing(exc):
                    raise
                return False
        return True

    def _mkdir(self, path: str) -> None:
        result = self.exec(["mkdir", "-p", "--", path], workdir="/", timeout=60)
        if not result.ok:
            raise SandboxError(f"cannot create {path} in the sandbox: {result.output.strip()}")

    def get_archive(self, path: str) -> Iterator[bytes]:
        self._flush()
        with self._errors(f"reading {path}"):
            try:
                stream, _stat = self._api.get_archive(self.id, path)
            except docker.errors.NotFound as exc:
                if _container_missing(exc):
                    raise
                raise FileNotFoundError(f"{path} does not exist in the sandbox") from exc
        return iter(stream)

    def oom_killed(self) -> bool:
        if self._oom is not None and self._oom.kills(self.id):
            return True
        with self._errors("reading its memory state"):
            if container_state(self._api, self.id).get("OOMKilled"):
                return True
        result = self.exec(f"cat {OOM_FILES} 2>/dev/null", workdir="/", timeout=30)
        return any(int(count) > 0 for count in _OOM_KILL.findall(result.output))

    def delete(self) -> None:
        remove_container(self._api, self.id)
        if self._oom is not None:
            self._oom.discard(self.id)
        disk = self._disks.discard(self.id) if self._disks else None
        if self._disk_root is not None:
            diskguard.release(self._disk_root, self.id, disk.mountpoint if disk else None)


def _container_missing(exc: docker.errors.NotFound) -> bool:
    return "no such container" in str(exc.explanation or exc).lower()


class _Prefixed:
    """`head`, then a tar that may be read again (bytes or a FileTar): readable
    again as a whole, so still sent again after a transient engine error."""

    def __init__(self, head: bytes, tail: Iterable[bytes]):
        self.head, self.tail = head, tail

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        yield from self.tail


def _after(head: bytes, tail: bytes | Iterable[bytes]) -> bytes | Iterable[bytes]:
    """`head` in front of `tail`, as resendable as `tail` was."""
    if isinstance(tail, bytes):
        return head + tail
    if isinstance(tail, Iterator):  # a generator: read once, so the whole is too
        return itertools.chain([head], tail)
    return _Prefixed(head, tail)
