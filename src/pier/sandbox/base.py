"""The sandbox contract. A failed command is data (ExecResult); a broken sandbox
raises SandboxError. Backends implement SandboxBackend and declare what they can
enforce (Capabilities); nothing above this layer knows which engine runs the
sandbox. pier.sandbox.conformance checks that a backend keeps this contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal

from pier.errors import PierError, SandboxError

SourceKind = Literal["snapshot", "image", "dockerfile"]
LineSink = Callable[[str], None]

LABEL_RUN = "pier.run"
LABEL_COLLECTION = "pier.collection"
LABEL_CREATED = "pier.created"
LABEL_DEADLINE = "pier.deadline"
LABEL_OWNER = "pier.owner"
LABEL_RECIPE = "pier.recipe"
LABEL_LAYER = "pier.layer"  # an agent layer: the agent it holds
LABEL_LAYER_VERSION = "pier.layer.version"
LABEL_LAYER_BASE = "pier.layer.base"  # the image it was built from
LABEL_VOLUME = "pier.volume"  # a collection's named volume: its name in the collection
LABEL_VOLUME_COLLECTION = "pier.volume.collection"  # ... and the collection that owns it


@dataclass(frozen=True)
class SandboxSource:
    """Where a sandbox's image comes from, fully resolved."""

    kind: SourceKind
    name: str  # snapshot name, image ref, or "generated"
    image: str | None = None  # an existing image ref to use or pull
    dockerfile: str | None = None  # a Dockerfile to build (snapshot recipe or generated)
    # Files of the build context beside the Dockerfile (name, content): the package lists
    files: tuple[tuple[str, bytes], ...] = ()
    log_line: str = ""
    notes: tuple[str, ...] = ()  # warnings, e.g. apt_packages ignored


@dataclass(frozen=True)
class Limits:
    cpus: float = 4.0
    memory: str = "8G"
    pids: int = 4096
    disk: str | None = "10G"
    network: bool = True
    # Hosts (names, optionally :port) the sandbox may reach; empty: no allow-list.
    egress: tuple[str, ...] = ()
    gpus: int = 0


@dataclass(frozen=True)
class Capabilities:
    """What a backend enforces (True) for the specs that ask for it. Which are
    refused and which only noted when missing: pier.sandbox.capabilities."""

    network_off: bool = False  # Limits.network=False: no route out at all
    egress_allowlist: bool = False  # Limits.egress: only the listed hosts
    memory_limit: bool = False  # Limits.memory, and oom_killed() tells when it bit
    cpu_limit: bool = False  # Limits.cpus
    pids_limit: bool = False  # Limits.pids
    disk_quota: bool = False  # Limits.disk: writes past it refused, limit_reached() says so
    gpus: bool = False  # Limits.gpus
    volumes: bool = False  # SandboxSpec.volumes: named volumes that outlive the sandbox, read-only when asked

    def declared(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self) if getattr(self, f.name))


@dataclass(frozen=True)
class VolumeMount:
    """A named volume of the engine mounted in the sandbox: made (with its
    labels) when it is not there yet, kept when the sandbox is deleted."""

    name: str  # the engine's name of the volume
    path: str  # where the sandbox sees it
    read_only: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class VolumeInfo:
    name: str  # the engine's name
    labels: Mapping[str, str]
    created: str | None = None  # as the engine says it
    in_use: int | None = None  # sandboxes that mount it now (None: not known)
    paths: tuple[str, ...] = ()  # where those sandboxes see it (a runbook's `path:`), when known


@dataclass(frozen=True)
class SandboxSpec:
    """What to create. Nothing in it names the host: files the sandbox needs at
    start travel as bytes (sandbox path -> content) and are in place when create
    returns, so a backend on another machine can honour it too."""

    image: str
    limits: Limits
    labels: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, bytes] = field(default_factory=dict)  # absolute sandbox path -> content
    name: str | None = None
    # An internal network (from ensure_internal_network) instead of the default one,
    # and the resolvers the sandbox uses; with limits.network False, no network wins.
    network_name: str | None = None
    dns: tuple[str, ...] = ()
    volumes: tuple[VolumeMount, ...] = ()  # capability `volumes`


@dataclass(frozen=True)
class LayerRecipe:
    """What an agent layer adds to an image: a shell script run once as root in a
    build FROM the image (never in a run's sandbox), e.g. Node and a pinned CLI.
    A layer is named by (image digest, name, version, script): a changed pin or
    script makes a new one."""

    name: str  # the agent
    version: str  # its pinned version
    script: str
    title: str = ""  # how an error names it, e.g. "codex 0.171.0 (@openai/codex@0.171.0 from npm)"


@dataclass(frozen=True)
class Layer:
    image: str  # the derived image's ref
    built_s: float | None = None  # how long the build took; None: it was there already
    ready: bool = True  # False: not built yet (ensure_layer with wait=False builds nothing)


@dataclass(frozen=True)
class LayerInfo:
    """An agent layer on the engine, as `pier snapshot layers` lists it."""

    image: str
    name: str
    version: str
    base: str
    size: int
    created: float  # epoch seconds
    last_used: float | None  # epoch seconds, when this machine last ran a sandbox of it


@dataclass(frozen=True)
class InternalNetwork:
    name: str
    address: str  # this machine's address on it
    subnet: str  # the sandboxes' addresses, e.g. 172.19.0.0/16
    interface: str = ""  # this machine's side of it (the bridge), where a host firewall matches it


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str  # stdout and stderr interleaved, as a terminal would show them
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class StdoutStream:
    """A command's stdout as it comes, bytes unchanged (nothing decoded, stderr
    kept apart): what reads files out of a sandbox in one command (`tar -c`)
    rather than one engine archive per folder. Iterate it for the chunks; once
    they end, result() says how the command ended, its output being the command's
    stderr (the last MAX_STDERR_CHARS characters). close() stops the command
    (killed, when it has not ended) and the reading; a `with` block closes it."""

    MAX_STDERR_CHARS = 1 << 16

    def __init__(self, chunks: Iterable[bytes], finish: Callable[[], ExecResult], close: Callable[[], None]):
        self._chunks = iter(chunks)
        self._finish, self._close = finish, close
        self._ended = self._closed = False
        self._result: ExecResult | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self._ended = True
            raise

    def result(self) -> ExecResult:
        """How the command ended; only once its stdout was read to its end."""
        if not self._ended:
            raise RuntimeError("StdoutStream.result() before its stdout was read to its end")
        if self._result is None:
            self._result = self._finish()
        return self._result

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> StdoutStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


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
        grace: float | None = None,
    ) -> ExecResult:
        """Run a command (a string goes through `bash -c`). Streams output lines to
        on_line as they come. On timeout the command's processes are killed and
        the result has timed_out=True; with a `grace` (seconds), its process
        group gets SIGTERM at the timeout and SIGKILL `grace` seconds later, and
        the exec lasts (its output still read) while any of the group runs in
        between. clean_env starts from `env -i`.
        Raises SandboxError only when the sandbox itself is unreachable."""

    @abstractmethod
    def exec_stdout(
        self, argv: Sequence[str], *, workdir: str = "/", timeout: float | None = None
    ) -> StdoutStream:
        """Start argv (never through a shell) with the sandbox's env and stream its
        stdout as bytes (StdoutStream); stderr is kept apart, for its result. On
        timeout its processes are killed and the result has timed_out=True.
        Raises SandboxError only when the sandbox itself is unreachable."""

    @abstractmethod
    def put_archive(self, dest_dir: str, tar_bytes: bytes | Iterable[bytes]) -> None:
        """Extract a tar stream into dest_dir (created if missing). Bytes, or an
        iterable that is not its own iterator (pier.sandbox.tarutil.FileTar), may
        be read twice, so a backend may send them again after a transient
        failure; a generator is sent once."""

    def put_files(self, dest_dir: str, files: Mapping[str, bytes], mode: int = 0o644) -> None:
        """Write files (relative name -> content) under dest_dir, creating the
        missing folders, in one archive."""
        folder = dest_dir.rstrip("/")
        self.put_tree({f"{folder}/{name}": content for name, content in files.items()}, mode=mode)

    def put_tree(self, files: Mapping[str, bytes], mode: int = 0o644, dirs: Sequence[str] = ()) -> None:
        """Write files (absolute sandbox path -> content) and make the empty folders
        `dirs`, wherever they are, in one archive extracted at the root: one round
        trip to the engine, and the root always exists, so no folder need be made
        first. Missing parent folders are created 0755 (as `mkdir -p` would); the
        tar carries no entry for them, so existing ones (/tmp, /etc) keep their mode."""
        from pier.sandbox.tarutil import tar_of_files

        entries = {path.lstrip("/"): content for path, content in files.items()}
        self.put_archive("/", tar_of_files(entries, mode=mode, dirs=[d.strip("/") for d in dirs]))

    def put_spec_files(self, files: Mapping[str, bytes]) -> None:
        """Place a spec's files (absolute sandbox path -> content), all in one
        archive. Backends call it at the end of create."""
        if files:
            self.put_tree(files)

    @abstractmethod
    def get_archive(self, path: str) -> Iterator[bytes]:
        """A tar stream of path (its basename is the tar's top entry).
        Raises FileNotFoundError when path does not exist."""

    @abstractmethod
    def oom_killed(self) -> bool:
        """Whether the kernel killed a process in this sandbox for memory."""

    def limit_reached(self) -> str | None:
        """A limit this sandbox reached that the backend enforces by stopping it
        (the disk limit: writes past it are refused and the sandbox is stopped
        within seconds), as the sentence a run fails with, naming the limit;
        None while none was. After it, exec raises SandboxError with it."""
        return None

    @abstractmethod
    def delete(self) -> None:
        """Stop and remove the sandbox. Idempotent, bounded in time, never raises."""


class SandboxBackend(ABC):
    """An engine that builds images and makes sandboxes from them."""

    name: str
    # What this backend enforces; create refuses a spec that needs more
    # (pier.sandbox.capabilities.refuse_unsupported).
    capabilities: Capabilities = Capabilities()

    @abstractmethod
    def ensure_image(self, source: SandboxSource, log: LineSink, timeout: float) -> str:
        """An image ref ready to run for source: used if present, else pulled or
        built (tagged by content hash, so a build is reused). Raises ImageError."""

    @abstractmethod
    def image_exists(self, ref: str) -> bool: ...

    def registry_has(self, ref: str) -> bool | None:
        """Whether ref's registry has that image (True, False), or None when this
        backend cannot ask one. Raises ImageError saying why the registry could
        not tell (unreachable, refused without credentials)."""
        return None

    def image_id(self, ref: str) -> str | None:
        """The content id of the image ref names now (a digest: the same id is the
        same files), or None when this backend has none or the image is missing.
        What is learnt of one id holds for every sandbox of it, across processes."""
        return None

    @property
    def runtime(self) -> str | None:
        """The OCI runtime (or the like) this backend's sandboxes run under, by name
        (runsc, runc), for the run's log, record and metrics; None: not told."""
        return None

    def runtime_reason(self) -> str | None:
        """One sentence naming that runtime and why it was chosen, or None."""
        return None

    def image_labels(self, ref: str) -> Mapping[str, str]:
        """The image's labels (what a snapshot says it carries: pier.agents,
        pier.mcp_servers), or {} when this backend has none or the image is missing."""
        return {}

    def image_file(self, ref: str, path: str) -> bytes | None:
        """One small file of the image, read without starting it (a snapshot's
        /etc/pier/snapshot.json), or None when absent or this backend cannot."""
        return None

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start a sandbox with spec.files in place. Raises CapabilityError
        (before creating anything) when spec needs a capability this backend lacks,
        SandboxError when the sandbox cannot be made; leaves nothing behind then."""

    @abstractmethod
    def attach(self, sandbox_id: str) -> Sandbox:
        """The running sandbox with this id, made earlier (by this process or
        another). Raises SandboxError when it is gone or not running."""

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

    def commit(self, sandbox_id: str, ref: str, labels: Mapping[str, str]) -> str:
        """The sandbox's filesystem as it is now, saved as image `ref` carrying
        `labels` (replacing an image of that ref); sandboxes created from it
        start with those files. Returns the ref. Raises SandboxError when the
        sandbox is gone or this backend cannot save one."""
        raise SandboxError(f"the {self.name} backend cannot save a sandbox as a snapshot")

    def pause(self, sandbox_id: str) -> None:
        """Freeze every process of the sandbox (its CPU freed; its memory kept):
        nothing runs until resume. Raises SandboxError when it is gone or this
        backend cannot pause."""
        raise SandboxError(f"the {self.name} backend cannot pause a sandbox")

    def resume(self, sandbox_id: str) -> None:
        """Thaw a paused sandbox (nothing to do when it runs). Raises SandboxError
        when it is gone or this backend cannot pause."""
        raise SandboxError(f"the {self.name} backend cannot pause a sandbox")

    def paused(self, sandbox_id: str) -> bool:
        """Whether the sandbox is paused now (False when it is gone)."""
        return False

    def list_volumes(self, labels: Mapping[str, str]) -> list[VolumeInfo]:
        """The named volumes carrying every one of `labels` (none for a backend
        without volumes)."""
        return []

    def remove_volume(self, name: str) -> bool:
        """Remove a named volume and its data; False when it was not there.
        Raises SandboxError when a sandbox uses it (or the engine refuses)."""
        return False

    def remove_image(self, ref: str) -> bool:
        """Remove an image commit made; False when it was not there (or a
        sandbox still uses it, or this backend keeps none). Never raises."""
        return False

    def ensure_layer(
        self, image: str, recipe: LayerRecipe, log: LineSink, timeout: float, wait: bool = True
    ) -> Layer | None:
        """An image made once from `image` plus what recipe installs, reused while
        image, recipe and its script stay the same; concurrent callers build it
        once. None when this backend makes no layers (the agent installs in each
        sandbox then). Raises ImageError when the build fails. With wait=False a
        missing layer is not built: the Layer returned is not ready (the caller
        installs in its sandbox, then may start_layer_build)."""
        return None

    def start_layer_build(self, image: str, recipe: LayerRecipe, timeout: float) -> bool:
        """Build the layer off the caller's path (it may outlive the caller) and
        return at once: True when this call started the build, False when the layer
        exists, another build of it is under way, or this backend makes none."""
        return False

    def wait_for_layer_build(self, image: str, recipe: LayerRecipe, timeout: float) -> bool:
        """Wait until no build of the layer is under way; whether it exists now."""
        return False

    def list_layers(self) -> list[LayerInfo]:
        """Every agent layer on the engine (none for a backend without layers)."""
        return []

    def remove_layer(self, image: str) -> bool:
        """Remove an agent layer; False when a sandbox still uses it (kept)."""
        return False

    def tls_env(self) -> Mapping[str, str]:
        """The environment that points TLS clients at the CA bundle this backend
        installs in its sandboxes (a fresh shell, such as the checks', needs it
        set again); empty when it installs none."""
        return {}

    def ensure_internal_network(self, name: str) -> InternalNetwork:
        """An internal network named `name` (created if missing): its sandboxes have no
        route out and reach only this machine, at the network's address.
        Raises SandboxError when the backend cannot make one."""
        raise SandboxError(f"the {self.name} backend cannot restrict egress (network.allow)")

    def host_address(self) -> str | None:
        """An address of this machine that sandboxes reach and the outside does not
        (Docker: the sandbox network's gateway), for services pier runs for its
        sandboxes (the model gateway). None when the backend has no such address."""
        return None

    def admit(self, address: str, port: int) -> str | None:
        """Let sandboxes reach TCP `port` on this machine's `address`: a service pier
        runs for them (the model gateway, the egress proxy), through the fence that
        keeps the machine's other services out of their reach. Returns why it could
        not (said as a run warning), or None; None too where there is no fence."""
        return None

    def isolation_problem(self) -> str | None:
        """Why this backend's sandboxes could reach services of this machine or of
        one another, when it can tell before any run (said once at start), or None."""
        return None


def say_runtime(backend: Callable[[], SandboxBackend], say: Callable[[str], None]) -> None:
    """Say once, at a CLI's or a server's start, which runtime its sandboxes run
    under and why; an engine that does not answer yet says nothing here (the run
    that needs it says why it cannot)."""
    try:
        reason = backend().runtime_reason()
    except PierError:
        return
    if reason:
        say(reason)
