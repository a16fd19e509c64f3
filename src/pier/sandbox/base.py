"""The sandbox contract. A failed command is data (ExecResult); a broken sandbox
raises SandboxError. Backends implement SandboxBackend; nothing above this layer
knows which engine runs the sandbox."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SourceKind = Literal["snapshot", "image", "dockerfile"]
LineSink = Callable[[str], None]

LABEL_RUN = "pier.run"
LABEL_COLLECTION = "pier.collection"
LABEL_CREATED = "pier.created"
LABEL_DEADLINE = "pier.deadline"
LABEL_OWNER = "pier.owner"
LABEL_RECIPE = "pier.recipe"


@dataclass(frozen=True)
class SandboxSource:
    """Where a sandbox's image comes from, fully resolved (SPEC 2)."""

    kind: SourceKind
    name: str  # snapshot name, image ref, or "generated"
    image: str | None = None  # an existing image ref to use or pull
    dockerfile: str | None = None  # a Dockerfile to build (snapshot recipe or generated)
    log_line: str = ""
    notes: tuple[str, ...] = ()  # warnings, e.g. apt_packages ignored


@dataclass(frozen=True)
class Limits:
    cpus: float = 4.0
    memory: str = "8G"
    pids: int = 4096
    disk: str | None = "10G"
    network: bool = True


@dataclass(frozen=True)
class SandboxSpec:
    image: str
    limits: Limits
    labels: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: Sequence[tuple[str, str]] = ()  # (host path, container path), read-only
    name: str | None = None


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str  # stdout and stderr interleaved, as a terminal would show them
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox seen by the sweeper, from its labels."""

    id: str
    labels: Mapping[str, str]
    running: bool


class Sandbox(ABC):
    """One isolated machine for one run."""

    id: str
    # What the backend actually applied, and why it differs from the spec, if it does.
    applied: Limits | None = None
    notes: tuple[str, ...] = ()

    @abstractmethod
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
        """Run a command (a string goes through `bash -c`). Streams output lines to
        on_line as they come. On timeout the command's processes are killed and
        the result has timed_out=True. clean_env starts from `env -i`.
        Raises SandboxError only when the sandbox itself is unreachable."""

    @abstractmethod
    def put_archive(self, dest_dir: str, tar_bytes: bytes | Iterator[bytes]) -> None:
        """Extract a tar stream into dest_dir (created if missing)."""

    def put_files(self, dest_dir: str, files: Mapping[str, bytes], mode: int = 0o644) -> None:
        """Write files (relative name -> content) under dest_dir."""
        from pier.sandbox.tarutil import tar_of_files

        self.put_archive(dest_dir, tar_of_files(files, mode=mode))

    def put_path(self, host_path: Path, dest_dir: str) -> None:
        """Copy a host file or folder tree into dest_dir."""
        from pier.sandbox.tarutil import tar_of_path

        self.put_archive(dest_dir, tar_of_path(host_path))

    @abstractmethod
    def get_archive(self, path: str) -> Iterator[bytes]:
        """A tar stream of path (its basename is the tar's top entry).
        Raises FileNotFoundError when path does not exist."""

    @abstractmethod
    def oom_killed(self) -> bool:
        """Whether the kernel killed a process in this sandbox for memory."""

    @abstractmethod
    def delete(self) -> None:
        """Stop and remove the sandbox. Idempotent, bounded in time, never raises."""


class SandboxBackend(ABC):
    """An engine that builds images and makes sandboxes from them."""

    name: str

    @abstractmethod
    def ensure_image(self, source: SandboxSource, log: LineSink, timeout: float) -> str:
        """An image ref ready to run for source: used if present, else pulled or
        built (tagged by content hash, so a build is reused). Raises ImageError."""

    @abstractmethod
    def image_exists(self, ref: str) -> bool: ...

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start a sandbox. Raises SandboxError."""

    @abstractmethod
    def list_sandboxes(self) -> list[SandboxInfo]:
        """Every sandbox pier made on this engine (found by label)."""

    @abstractmethod
    def remove(self, sandbox_id: str) -> None:
        """Remove a sandbox by id. Idempotent; never raises."""

    @abstractmethod
    def ping(self, timeout: float | None = None) -> None:
        """Raise SandboxError saying how to start the engine if it does not answer
        (within `timeout` seconds when given: a health check must answer quickly)."""
