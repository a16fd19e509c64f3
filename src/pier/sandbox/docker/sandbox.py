"""One Docker container as a pier Sandbox."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

import docker
import docker.errors

from pier.errors import SandboxError
from pier.sandbox.base import ExecResult, LineSink, Sandbox
from pier.sandbox.docker.client import docker_errors
from pier.sandbox.docker.containers import container_state, remove_container
from pier.sandbox.docker.execs import run_exec

# cgroup v1 memory.oom_control and v2 memory.events both count "oom_kill N".
OOM_FILES = "/sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events"
_OOM_KILL = re.compile(r"^oom_kill (\d+)$", re.MULTILINE)


class DockerSandbox(Sandbox):
    def __init__(self, api: docker.APIClient, container_id: str, engine_url: str):
        self.id = container_id
        self._api = api
        self._url = engine_url

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
    ) -> ExecResult:
        with self._errors("running a command"):
            return run_exec(
                self._api,
                self.id,
                command,
                env=env,
                workdir=workdir,
                timeout=timeout,
                on_line=on_line,
                clean_env=clean_env,
            )

    def put_archive(self, dest_dir: str, tar_bytes: bytes | Iterator[bytes]) -> None:
        root = dest_dir.rstrip("/") == ""  # always exists: one round trip, bytes or stream
        if root or (isinstance(tar_bytes, bytes) and self._put_if_folder_exists(dest_dir, tar_bytes)):
            if root:
                with self._errors("copying files into /"):
                    self._api.put_archive(self.id, "/", tar_bytes)
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
        with self._errors(f"reading {path}"):
            try:
                stream, _stat = self._api.get_archive(self.id, path)
            except docker.errors.NotFound as exc:
                if _container_missing(exc):
                    raise
                raise FileNotFoundError(f"{path} does not exist in the sandbox") from exc
        return iter(stream)

    def oom_killed(self) -> bool:
        with self._errors("reading its memory state"):
            if container_state(self._api, self.id).get("OOMKilled"):
                return True
        result = self.exec(f"cat {OOM_FILES} 2>/dev/null", workdir="/", timeout=30)
        return any(int(count) > 0 for count in _OOM_KILL.findall(result.output))

    def delete(self) -> None:
        remove_container(self._api, self.id)


def _container_missing(exc: docker.errors.NotFound) -> bool:
    return "no such container" in str(exc.explanation or exc).lower()
