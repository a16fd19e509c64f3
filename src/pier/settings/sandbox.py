"""The sandboxes: images, the engine and its runtime, isolation, the warm pool."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Where Debian/Ubuntu keep the system trust store; a host that trusts other CAs
# (an intercepting proxy) usually says so through one of the variables below.
STANDARD_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_CA_ENV_HINTS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
# The snapshot a runbook that names none runs in (PIER_DEFAULT_SNAPSHOT overrides it).
DEFAULT_SNAPSHOT = "python312-uv"


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


class SandboxSettings(BaseModel):
    """Sandboxes: where their images come from, the engine and runtime they run on,
    how they are isolated, their fixed limits, and the warm pool."""

    base_image: str = Field(
        "python:3.13-slim-bookworm",
        description="base of generated Dockerfiles; point at a local image offline",
    )
    snapshot_base_image: str = Field(
        "python:3.12-slim-bookworm", description="base of the built-in snapshot recipes"
    )
    python_install_mirror: str = Field(
        "",
        description="base URL of a python-build-standalone mirror the built-in snapshots take Python 3.12 "
        "from (uv's UV_PYTHON_INSTALL_MIRROR) when the base has no python3.12 and its package manager none; "
        "empty: the build warns and python3 stays the base's",
    )
    image_lookup_registry: bool = Field(
        True,
        description="pier validate asks an image's registry (through the engine, as a pull would) whether "
        "an image this machine lacks exists; false: it looks on this machine only (air-gapped hosts)",
    )
    ca_bundle: Path | None = Field(
        default_factory=detect_host_ca_bundle,
        description="extra CA certificates for image builds and sandboxes",
    )
    default_snapshot: str = Field(DEFAULT_SNAPSHOT, description="the snapshot of a runbook that names none")
    docker_host: str | None = Field(None, description="Docker engine URL; default from DOCKER_HOST")
    engine_retry_sec: float = Field(
        30,
        ge=0,
        description="how long an engine call that may be repeated (create, inspect, an archive, an exec "
        "not yet started) is tried again after a transient error (500/502/503/504, connection lost, timeout)",
    )
    sandbox_backend: str = Field(
        "docker",
        description="sandbox backend: docker, fake (tests), a registered name, or module:factory",
    )
    sandbox_runtime: str | None = Field(
        "auto",
        description="OCI runtime for sandboxes: auto (gVisor's runsc where the engine has it registered, "
        "else the strongest of kata, sysbox-runc, else the engine's default), or a name: runsc, runc, ...",
    )
    sandbox_cap_add: str = Field(
        "", description="capabilities sandboxes keep beyond pier's set, comma-separated (e.g. NET_RAW)"
    )
    sandbox_no_new_privileges: bool = Field(
        True, description="no setuid binary or file capability raises privileges in a sandbox"
    )
    disk_limit: str = Field("10G", description="each sandbox's disk (all it writes); empty: no limit")
    disk_guard_spares: int = Field(
        2,
        ge=0,
        le=64,
        description="where the disk limit is a loop-mounted file: this many of each size formatted ahead "
        "of time, so a sandbox's create does not run mkfs (0: each sandbox formats its own)",
    )
    pids_limit: int = Field(4096, description="processes (and threads) a sandbox may have at once")
    create_timeout_sec: int = Field(1200, description="building or pulling a sandbox's image, at most")
    agent_install_timeout_sec: int = Field(600, description="installing an agent CLI, at most")
    # Agent layers: an agent CLI is installed once per image and pin, in an image
    # derived from the run's, instead of in every sandbox.
    agent_layers: bool = Field(
        True, description="build each agent CLI once per image into a cached layer (false: install per run)"
    )
    agent_layer_background: bool = Field(
        True,
        description="a run that finds no layer installs in its sandbox and the layer is built in the "
        "background after (false: the run waits for the build); runs without open network always wait",
    )
    cleanup_timeout_sec: int = Field(60, description="deleting a sandbox, at most")
    sweep_grace_sec: int = Field(300, description="a sandbox past its run's deadline by this much is swept")
    keep_ttl_sec: int = Field(
        1800,
        ge=1,
        description="a sandbox kept after its run (`pier run --keep`, init_params.keep_sandbox) is swept "
        "this long after the run ends, unless a run continues in it first",
    )
    volumes_per_collection: int = Field(
        16,
        ge=0,
        description="named volumes (a runbook's `volumes:`) a collection may have on the engine at once: a "
        "run that would make one more is refused; 0 turns volumes off",
    )
    sweep_interval_sec: float = Field(300, gt=0, description="how often the server sweeps sandboxes")
    sweep_foreign: bool = Field(
        True, description="the server also sweeps sandboxes of runs its store does not know (owner gone)"
    )
    # Isolation: the network sandboxes share without seeing each other, and the
    # host services (besides pier's own) a sandbox may reach, named by the operator.
    sandbox_network: str = Field(
        "pier-sandbox",
        description="Docker network of sandboxes with network on and no allow-list (inter-container traffic off)",
    )
    sandbox_host_allow: str = Field(
        "",
        description="host services sandboxes may reach besides pier's own, comma-separated ADDRESS:PORT "
        "(e.g. 172.17.0.1:5000 for a local registry)",
    )
    create_concurrency: int = Field(
        0,
        ge=0,
        description="sandbox creates one pier process asks the engine for at once (0: adaptive, following "
        "how fast the engine creates; docs/speed.md)",
    )
    warm_pool: list[WarmPoolEntry] = Field(
        default_factory=list,
        description='sources pier serve keeps ready sandboxes of, e.g. [{"image": "IMAGE", "size": 2}]',
    )
    warm_pool_check_sec: float = Field(
        10, gt=0, description="how often the warm pool checks its sandboxes still run, and refills"
    )

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
