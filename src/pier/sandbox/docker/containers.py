"""Containers as sandboxes: what a SandboxSpec maps to on the engine, and one small
function per container verb (create, start, list, remove)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import docker.types
import requests

from pier.limits import parse_size
from pier.sandbox.base import LABEL_CREATED, LABEL_OWNER, LABEL_RUN, SandboxInfo, SandboxSpec
from pier.sandbox.docker.client import EngineFacts
from pier.sandbox.docker.hardening import Hardening
from pier.sandbox.docker.keepalive import KEEPALIVE

log = logging.getLogger(__name__)

# Minimal images have no init and an entrypoint that exits; the keep-alive (a
# sleep, once it has taken the first archive on its stdin: keepalive.py) keeps
# the sandbox up, and docker-init (init=True) reaps what the agent orphans.
WORKDIR = "/app"


def hostname_for(trajectory_id: str | None) -> str:
    """A valid hostname (RFC 1123 label) that names the run."""
    slug = re.sub(r"[^a-z0-9-]+", "-", (trajectory_id or "").lower()).strip("-")
    return f"pier-{slug}"[:63].rstrip("-") if slug else "pier-sandbox"


@dataclass(frozen=True)
class ContainerPlan:
    create: dict[str, Any]  # APIClient.create_container arguments, but host_config
    host: dict[str, Any]  # APIClient.create_host_config arguments


def plan_container(
    spec: SandboxSpec,
    facts: EngineFacts,
    *,
    owner: str,
    extra_env: Mapping[str, str] | None = None,
    now: float | None = None,
    hardening: Hardening | None = None,
) -> ContainerPlan:
    """The engine arguments for spec: limits, labels, keepalive, network, and the
    hardening (the default one when none is given: a sandbox is never created
    with Docker's full default privileges by omission). Pure."""
    labels = {LABEL_OWNER: owner, LABEL_CREATED: str(int(now or time.time())), **spec.labels}
    memory = parse_size(spec.limits.memory)
    host: dict[str, Any] = {
        "init": True,
        "nano_cpus": int(min(spec.limits.cpus, facts.ncpu) * 1e9),
        "mem_limit": memory,
        "memswap_limit": memory,  # equal to mem_limit: no swap
        "pids_limit": spec.limits.pids,
        **(hardening or Hardening()).host_config(),
    }
    if not spec.limits.network:
        host["network_mode"] = "none"
    elif spec.network_name:
        host["network_mode"] = spec.network_name
        if spec.dns:
            host["dns"] = list(spec.dns)
    if spec.limits.disk and facts.disk_quota:
        host["storage_opt"] = {"size": spec.limits.disk}
    if spec.volumes:  # named volumes (made beforehand, with their labels); read-only ones mounted so
        host["mounts"] = [
            docker.types.Mount(target=v.path, source=v.name, type="volume", read_only=v.read_only)
            for v in spec.volumes
        ]
    create = {
        "image": spec.image,
        "entrypoint": KEEPALIVE,
        "command": None,
        "stdin_open": True,  # with StdinOnce (the SDK's default then): the first archive's channel
        "working_dir": WORKDIR,
        "user": "0",  # the agent runs as root (apt-get and friends work as on the platform)
        "hostname": hostname_for(spec.labels.get(LABEL_RUN)),
        "labels": labels,
        "environment": {**(extra_env or {}), **spec.env},
        # A name of its own: a create tried again after its answer was lost finds
        # the container it made by this name, instead of making a second (retrying.py).
        "name": spec.name or f"{hostname_for(spec.labels.get(LABEL_RUN))}-{uuid.uuid4().hex[:8]}",
    }
    return ContainerPlan(create=create, host=host)


def create_container(api: docker.APIClient, plan: ContainerPlan) -> str:
    host_config = api.create_host_config(**plan.host)
    return str(api.create_container(host_config=host_config, **plan.create)["Id"])


def start_container(api: docker.APIClient, container_id: str) -> None:
    api.start(container_id)


def list_containers(api: docker.APIClient) -> list[SandboxInfo]:
    """Every container with a pier.run label, running or not."""
    found = api.containers(all=True, filters={"label": LABEL_RUN})
    return [
        SandboxInfo(id=c["Id"], labels=c.get("Labels") or {}, running=c.get("State") == "running")
        for c in found
    ]


def remove_container(api: docker.APIClient, container_id: str) -> None:
    """Force-remove a container and its anonymous volumes. Idempotent; logs, never raises."""
    try:
        api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # removal already in progress elsewhere
            return
        log.warning("could not remove sandbox %s: %s", container_id[:12], exc.explanation or exc)
    except (requests.RequestException, OSError) as exc:
        log.warning("could not remove sandbox %s: %s", container_id[:12], exc)


def container_state(api: docker.APIClient, container_id: str) -> dict[str, Any]:
    return dict(api.inspect_container(container_id).get("State") or {})
