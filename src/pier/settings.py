"""Every PIER_* setting, in one place (pydantic-settings)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pier.limits import check_memory
from pier.outbound import OutboundPolicy, parse_allowed

# Where Debian/Ubuntu keep the system trust store; a host that trusts other CAs
# (an intercepting proxy) usually says so through one of the variables below.
STANDARD_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_CA_ENV_HINTS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
# The snapshot a runbook that names none runs in (PIER_DEFAULT_SNAPSHOT overrides it).
DEFAULT_SNAPSHOT = "python312-uv"


# Files pier creates are its owner's alone (logs, the encrypted environment,
# token hashes, keys): folders 0700, files 0600. The entry points set this umask;
# the roots are made private here too, for whoever uses pier as a library.
PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> Path:
    """path as a folder only its owner can enter (made, or tightened if it exists)."""
    path = path.expanduser()
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    if path.stat().st_mode & 0o077:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def _default_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "pier"


def _default_concurrency() -> int:
    # One run per core: a run's own work is mostly in its sandbox, and the
    # default sandbox asks for 4 CPUs, so more would only oversubscribe.
    return max(1, os.cpu_count() or 1)


def detect_host_ca_bundle() -> Path | None:
    """The host's CA bundle when the host points tools at one (proxy setups), else None."""
    for name in _CA_ENV_HINTS:
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return None


class WarmPoolEntry(BaseModel):
    """One source the server keeps ready sandboxes of (PIER_WARM_POOL, a JSON list).
    A run claims one when its plan has the same image and limits."""

    model_config = ConfigDict(extra="forbid")

    snapshot: str | None = Field(None, description="a snapshot name, as a runbook's `snapshot`")
    image: str | None = Field(None, description="an image ref, as a runbook's `image`")
    agent: str | None = Field(
        None, description="keep them of this agent's layer (its CLI installed), as runs of that agent use"
    )
    size: int = Field(1, ge=1, le=64, description="how many ready, unused sandboxes to keep")
    cpus: float | None = Field(None, gt=0, description="default PIER_DEFAULT_CPUS")
    memory: str | None = Field(None, description="default PIER_DEFAULT_MEMORY")
    network: bool = True

    @model_validator(mode="after")
    def _one_source(self) -> WarmPoolEntry:
        if bool(self.snapshot) == bool(self.image):
            raise ValueError("give exactly one of `snapshot` and `image` for each warm pool entry")
        return self


class Settings(BaseSettings):
    # A `.env` file in the working folder holds settings for every shell (an
    # `export` lasts for one); the environment wins over it.
    model_config = SettingsConfigDict(env_prefix="PIER_", extra="ignore", env_file=".env")

    home: Path = Field(default_factory=_default_home, description="state: db, storage, snapshots.yaml")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default SQLite in home")
    storage_dir: Path | None = Field(None, description="run outputs; default <home>/storage")
    storage_url: str | None = Field(
        None,
        description="where outputs and uploads live: file:///path or s3://bucket/prefix; default storage_dir",
    )
    storage_presign_sec: int = Field(
        0,
        ge=0,
        le=7 * 24 * 3600,
        description="on S3: file downloads redirect to URLs valid this long; 0 streams",
    )
    scratch_dir: Path | None = Field(None, description="runs' local working folders; default <home>/tmp")

    base_image: str = Field(
        "python:3.13-slim-bookworm",
        description="base of generated Dockerfiles; point at a local image offline",
    )
    snapshot_base_image: str = Field(
        "python:3.12-slim-bookworm", description="base of the built-in snapshot recipes"
    )
    ca_bundle: Path | None = Field(
        default_factory=detect_host_ca_bundle,
        description="extra CA certificates for image builds and sandboxes",
    )

    default_snapshot: str = DEFAULT_SNAPSHOT
    default_cpus: float = Field(4.0, gt=0)
    default_memory: str = "8G"
    default_timeout_sec: int = Field(1800, ge=1)
    max_timeout_sec: int = Field(1800, ge=1, description="the longest time limit a run may ask for")
    max_cpus: float = Field(64.0, gt=0, description="the most CPUs a run may ask for")
    max_memory: str = Field("64G", description="the most memory a run may ask for")
    disk_limit: str = Field("10G", description="each sandbox's disk (all it writes); empty: no limit")
    # The disk limit where the engine's storage driver has no quotas: each sandbox's
    # writable layer on a loop-mounted file of the limit's size, kept here.
    disk_guard_dir: Path | None = Field(None, description="sandbox disk files; default <home>/sandbox-disks")
    # What the attached files of one run may become in /app/assets (zips expanded).
    max_assets_bytes: int = Field(1 << 30, ge=1, description="all attached files, zips expanded")
    max_assets_files: int = Field(10_000, ge=1, description="files in /app/assets, zip entries counted")
    max_asset_file_bytes: int = Field(512 << 20, ge=1, description="one file, or one zip entry")
    max_zip_ratio: float = Field(100.0, gt=1, description="expanded / compressed size of one zip")
    # A run's variables (strict by default: nothing wrong is accepted silently).
    allow_extra_vars: bool = Field(
        False, description="accept --var/vars keys the runbook has no variable for"
    )
    allow_unfilled_vars: bool = Field(
        False, description="leave a declared variable with no value as written instead of refusing the run"
    )
    # What collect copies out of one sandbox (results, logs, assets), checked as it streams.
    max_output_bytes: int = Field(10 << 30, ge=1, description="a run's collected outputs, in all")
    max_output_files: int = Field(100_000, ge=1, description="files in a run's collected outputs")
    pids_limit: int = 4096
    create_timeout_sec: int = 1200
    agent_install_timeout_sec: int = 600
    # Agent layers (speed): an agent CLI is installed once per image and pin, in an
    # image derived from the run's, instead of in every sandbox.
    agent_layers: bool = Field(
        True, description="build each agent CLI once per image into a cached layer (false: install per run)"
    )
    cleanup_timeout_sec: int = 60
    sweep_grace_sec: int = 300

    docker_host: str | None = Field(None, description="Docker engine URL; default from DOCKER_HOST")
    sandbox_backend: str = Field(
        "docker",
        description="sandbox backend: docker, fake (tests), a registered name, or module:factory",
    )
    sandbox_runtime: str | None = Field(
        None,
        description="OCI runtime for sandboxes (runsc, kata, sysbox-runc, or auto); default the engine's",
    )
    sandbox_cap_add: str = Field(
        "", description="capabilities sandboxes keep beyond pier's set, comma-separated (e.g. NET_RAW)"
    )
    sandbox_no_new_privileges: bool = Field(
        True, description="no setuid binary or file capability raises privileges in a sandbox"
    )

    # The model gateway: agents reach their provider through pier, holding a per-run token.
    gateway: bool = Field(
        True, description="route agents' model calls through pier's gateway (keys stay out)"
    )
    gateway_host: str | None = Field(
        None, description="address the gateway listens on; default the Docker bridge's gateway address"
    )
    gateway_port: int = Field(0, ge=0, le=65535, description="0: a free port")
    gateway_max_requests: int | None = Field(None, ge=1, description="default per-run model request budget")
    gateway_max_tokens: int | None = Field(None, ge=1, description="default per-run token budget")
    gateway_max_cost_usd: float | None = Field(None, gt=0, description="default per-run cost budget (USD)")

    # The outbound policy (pier.outbound): the one place an operator lets pier
    # connect, for a run, to a loopback, link-local, private or own address.
    outbound_allow: str = Field(
        "",
        description="destinations runs may reach that are otherwise refused (loopback, private, this "
        "machine): host names, addresses, CIDRs, each optionally :port, comma-separated",
    )

    network_allow: str = Field(
        "", description="egress allow-list every run gets (comma-separated); runs add their network.allow"
    )
    egress_network: str = Field(
        "pier-egress", description="internal Docker network of allow-listed sandboxes"
    )

    # Sandbox isolation: the network sandboxes share without seeing each other, and
    # the host services (besides pier's own) a sandbox may reach, named by the operator.
    sandbox_network: str = Field(
        "pier-sandbox",
        description="Docker network of sandboxes with network on and no allow-list (inter-container traffic off)",
    )
    sandbox_host_allow: str = Field(
        "",
        description="host services sandboxes may reach besides pier's own, comma-separated ADDRESS:PORT "
        "(e.g. 172.17.0.1:5000 for a local registry)",
    )

    # pier serve (the run API)
    admin_token: SecretStr | None = Field(None, description="bearer token that manages collections")
    secret_key: SecretStr | None = Field(
        None, description="Fernet key for collection environment values; default <home>/secret.key"
    )
    max_concurrent_runs: int = Field(default_factory=_default_concurrency, ge=1)
    max_upload_bytes: int = Field(512 * 1024 * 1024, ge=1, description="per upload request, else 413")
    # Limits before the routes (fair: nothing unbounded before authentication)
    max_json_bytes: int = Field(1 << 20, ge=1, description="a request body other than an upload, else 413")
    max_json_depth: int = Field(64, ge=2, le=500, description="nesting of a JSON body, else 422")
    http_header_timeout_sec: float = Field(
        10.0, gt=0, description="a request's line and headers must arrive within this"
    )
    http_body_idle_sec: float = Field(
        30.0, gt=0, description="the most time between two pieces of a request body"
    )
    http_keepalive_sec: int = Field(5, ge=1, description="an idle connection is closed after this")
    # Quotas per collection: server defaults the admin can override per collection (fair)
    quota_concurrent_runs: int | None = Field(
        None, ge=1, description="runs of one collection at once; default: all of the server's slots"
    )
    quota_queued_runs: int = Field(100, ge=0, description="runs of one collection waiting for a slot")
    quota_streams_per_token: int = Field(20, ge=1, description="live log streams open per token")
    quota_upload_bytes: int = Field(2 << 30, ge=0, description="one collection's stored uploads, in all")
    quota_output_bytes: int = Field(50 << 30, ge=0, description="one collection's stored run outputs, in all")
    sweep_interval_sec: float = Field(300, gt=0, description="how often the server sweeps sandboxes")
    sweep_foreign: bool = Field(
        True, description="the server also sweeps sandboxes of runs its store does not know (owner gone)"
    )
    routine_poll_sec: float = Field(
        10, gt=0, description="how often the server looks for due routines (a tick fires at most this late)"
    )
    # Experiments (pier.experiments): a task over a matrix, scheduled by the server.
    experiment_poll_sec: float = Field(
        1.0, gt=0, description="how often the server starts an experiment's next runs and notes ended ones"
    )
    experiment_lease_sec: float = Field(
        30, gt=0, description="a server that stopped hands its experiments on after this long"
    )
    experiment_max_runs: int = Field(100_000, ge=1, description="runs one experiment may start, at most")
    upload_ttl_sec: float = Field(
        24 * 3600,
        gt=0,
        description="uploads are deleted this long after they were made, once no run needs them",
    )
    warm_pool: list[WarmPoolEntry] = Field(
        default_factory=list,
        description='sources pier serve keeps ready sandboxes of, e.g. [{"image": "IMAGE", "size": 2}]',
    )
    warm_pool_check_sec: float = Field(
        10, gt=0, description="how often the warm pool checks its sandboxes still run, and refills"
    )
    # Webhooks: a durable queue in the database (fair: delivery per collection)
    webhook_backoff_sec: float = Field(
        1.0, ge=0, description="first retry delay; doubles each time, up to 5 minutes"
    )
    webhook_window_sec: float = Field(
        6 * 3600, gt=0, description="how long after a run ended its webhook is still retried"
    )
    webhook_attempt_timeout_sec: float = Field(
        10.0, gt=0, description="connect, send and answer timeout of one webhook attempt"
    )
    webhook_lane: int = Field(2, ge=1, description="webhook attempts at once per collection")
    trial_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description='shared provider keys for trial runs, JSON: {"ANTHROPIC_API_KEY": "..."}',
    )
    trial_runs: int = Field(10, ge=0, description="trial runs per collection")
    web_behind_tls: bool = Field(
        False, description="the web UI is reached over HTTPS through a proxy: its cookie is Secure"
    )

    # The fleet: runs on Temporal, executed by `pier worker` processes.
    executor: Literal["inprocess", "temporal"] = Field(
        "inprocess", description="inprocess: runs execute in `pier serve`; temporal: on `pier worker`s"
    )
    temporal_address: str = Field("127.0.0.1:7233", description="Temporal frontend host:port")
    temporal_namespace: str = "default"
    temporal_task_queue: str = Field("pier-runs", description="the queue runs wait on for a worker")
    worker_identity: str | None = Field(None, description="a `pier worker`'s name; default host-pid")
    worker_slots: int = Field(default_factory=_default_concurrency, ge=1, description="runs a worker holds")
    heartbeat_timeout_sec: float = Field(
        15, gt=0, description="a worker silent this long is lost: its run restarts or fails"
    )
    schedule_to_start_sec: float = Field(
        15, gt=0, description="how long a stage waits for its sandbox's worker to take it"
    )

    # Observability: metrics, traces (OTEL_* variables), the audit log.
    metrics_token: SecretStr | None = Field(
        None, description="bearer token a scraper sends for /metrics on the API's port (the admin token works too)"
    )
    metrics_address: str | None = Field(
        None,
        description="host:port of a /metrics listener of its own, no token (pier serve and pier worker)",
    )
    metrics_collections: bool = Field(
        False, description="label run metrics with their collection (one series per collection)"
    )
    audit_retention_days: float = Field(90, gt=0, description="audit entries older than this are deleted")
    trace_url: str | None = Field(
        None, description="a trace viewer's URL with {trace_id}, linked from the web UI's run page"
    )

    @field_validator("metrics_address")
    @classmethod
    def _metrics_address(cls, value: str | None) -> str | None:
        if value is not None:
            _, sep, port = value.rpartition(":")
            if not sep or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{value!r} is no host:port (e.g. 127.0.0.1:9464)")
        return value

    # Faults: how long a run rides out a service that does not answer, and how
    # the server finds the runs a fault left without an owner (docs/faults.md).
    db_retry_sec: float = Field(
        120, ge=0, description="how long a run's database write is tried again while the database is down"
    )
    reconcile_interval_sec: float = Field(
        15, gt=0, description="how often a fleet server resubmits or ends runs a fault left ownerless"
    )
    submit_timeout_sec: float = Field(
        30, gt=0, description="how long accepting a run waits for Temporal before refusing it (503)"
    )
    disk_reserve_bytes: int = Field(
        64 << 20,
        ge=0,
        description="free space collect leaves on the scratch and database disks, or fails early",
    )
    storage_retry_sec: float = Field(
        120, ge=0, description="how long save tries again to store a run's outputs while storage fails"
    )

    @field_validator("storage_url")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("file://", "s3://")):
            raise ValueError(f"{value!r} is no storage URL: write file:///PATH or s3://BUCKET/PREFIX")
        return value

    @field_validator("sandbox_host_allow")
    @classmethod
    def _host_allow(cls, value: str) -> str:
        for entry in (e.strip() for e in value.split(",")):
            host, sep, port = entry.rpartition(":")
            if entry and not (sep and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(
                    f"{entry!r} is not ADDRESS:PORT (e.g. 172.17.0.1:5000); list the host services "
                    "sandboxes may reach as ADDRESS:PORT, comma-separated"
                )
        return value

    @field_validator("outbound_allow")
    @classmethod
    def _outbound_allow(cls, value: str) -> str:
        parse_allowed(value)  # a bad entry stops pier at start, not at a run's first connection
        return value

    @field_validator("default_memory", "max_memory")
    @classmethod
    def _memory_size(cls, value: str) -> str:
        return check_memory(value)  # sizes are read one way everywhere

    @property
    def outbound(self) -> OutboundPolicy:
        return OutboundPolicy.from_setting(self.outbound_allow)

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'pier.db'}"

    @property
    def storage_root(self) -> Path:
        return self.storage_dir or self.home / "storage"

    @property
    def storage_location(self) -> str:
        """PIER_STORAGE_URL, else the local folder as a file:// URL."""
        return self.storage_url or self.storage_root.expanduser().absolute().as_uri()

    @property
    def layers_dir(self) -> Path:
        """Build locks and last-use marks of agent layers."""
        return self.home / "layers"

    @property
    def disk_guard_root(self) -> Path:
        return self.disk_guard_dir or self.home / "sandbox-disks"

    @property
    def scratch_root(self) -> Path:
        return self.scratch_dir or self.home / "tmp"

    @property
    def snapshots_file(self) -> Path:
        return self.home / "snapshots.yaml"

    @property
    def secret_key_file(self) -> Path:
        return self.home / "secret.key"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
