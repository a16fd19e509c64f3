"""The Docker engine connection: the client, the engine facts pier adapts to, and
docker SDK errors turned into pier's. The only place that opens a connection."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests

from pier.errors import SandboxError
from pier.settings import Settings

DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"
# Bounds every plain API call (create, inspect, remove...); streams set their own.
API_TIMEOUT_S = 120
# Storage drivers that honour `--storage-opt size=` (overlay2 only over xfs+pquota).
_QUOTA_DRIVERS = {"btrfs", "zfs", "devicemapper", "windowsfilter"}


def engine_url(settings: Settings) -> str:
    return settings.docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_URL


def engine_is_local(url: str) -> bool:
    """Whether the engine runs on this machine (its socket is a local file)."""
    return url.startswith(("unix://", "npipe://"))


def no_engine_error(url: str, cause: object = None) -> SandboxError:
    detail = f" ({cause})" if cause else ""
    return SandboxError(
        f"No Docker engine answers at {url}{detail}: start it "
        "(e.g. `dockerd &` or `systemctl start docker`) or set DOCKER_HOST"
    )


def connect(settings: Settings) -> docker.APIClient:
    """A low-level client for the configured engine. Raises SandboxError when
    no engine answers (the SDK asks the engine its API version on connect)."""
    url = engine_url(settings)
    try:
        if settings.docker_host:
            api = docker.APIClient(base_url=settings.docker_host, timeout=API_TIMEOUT_S)
        else:
            api = docker.from_env(timeout=API_TIMEOUT_S).api
    except docker.errors.DockerException as exc:
        raise no_engine_error(url, exc) from exc
    if api.base_url.startswith("http+docker://"):
        # A Unix socket goes through no proxy: requests would still read the
        # proxy variables from the environment on every call (a third of a
        # small call's CPU). An engine over TCP keeps them.
        api.trust_env = False
    return api


@contextmanager
def docker_errors(what: str, url: str = "the Docker engine") -> Iterator[None]:
    """Turn the SDK's and requests' errors raised while doing `what` into SandboxError."""
    try:
        yield
    except docker.errors.NotFound as exc:
        raise SandboxError(f"{what}: {_explain(exc)}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"{what}: the engine refused: {_explain(exc)}") from exc
    except (requests.ConnectionError, ConnectionError) as exc:
        raise no_engine_error(url, exc) from exc
    except (requests.Timeout, TimeoutError) as exc:
        raise SandboxError(f"{what}: the engine did not answer in time ({exc})") from exc


def _explain(exc: docker.errors.APIError) -> str:
    return str(exc.explanation or exc)


@dataclass(frozen=True)
class EngineFacts:
    ncpu: int
    storage_driver: str
    backing_fs: str | None
    runtimes: tuple[str, ...] = ()  # OCI runtimes the engine has registered (runc, runsc...)
    root_dir: str | None = None  # the engine's data root (/var/lib/docker)
    default_runtime: str = "runc"  # the runtime a container gets when none is named

    @property
    def disk_quota(self) -> bool:
        """Whether a per-container disk size limit can be set on this engine."""
        if self.storage_driver in _QUOTA_DRIVERS:
            return True
        return self.storage_driver == "overlay2" and self.backing_fs == "xfs"


def engine_facts(info: dict[str, Any]) -> EngineFacts:
    status = dict(info.get("DriverStatus") or [])
    return EngineFacts(
        ncpu=int(info.get("NCPU") or os.cpu_count() or 1),
        storage_driver=str(info.get("Driver") or ""),
        backing_fs=status.get("Backing Filesystem"),
        runtimes=tuple(info.get("Runtimes") or {}),
        root_dir=info.get("DockerRootDir"),
        default_runtime=str(info.get("DefaultRuntime") or "runc"),
    )


def bridge_address(network: dict[str, Any]) -> str | None:
    """The gateway address of a Docker network (its host side), from inspect_network."""
    config = ((network.get("IPAM") or {}).get("Config") or [{}])[0]
    if config.get("Gateway"):
        return str(config["Gateway"])
    if config.get("Subnet"):  # the engine gives the bridge the subnet's first address
        return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
    return None
