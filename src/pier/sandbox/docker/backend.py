"""The Docker engine as a SandboxBackend: wires images, containers and execs."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import cached_property

import docker
import docker.errors
import requests

from pier.errors import SandboxError
from pier.sandbox.base import (
    Capabilities,
    InternalNetwork,
    Layer,
    LayerInfo,
    LayerRecipe,
    Limits,
    LineSink,
    SandboxBackend,
    SandboxInfo,
    SandboxSource,
    SandboxSpec,
)
from pier.sandbox.capabilities import refuse_unsupported
from pier.sandbox.docker import images, layers
from pier.sandbox.docker.client import (
    EngineFacts,
    connect,
    docker_errors,
    engine_facts,
    engine_url,
    no_engine_error,
)
from pier.sandbox.docker.containers import (
    ContainerPlan,
    create_container,
    list_containers,
    plan_container,
    remove_container,
    start_container,
)
from pier.sandbox.docker.hardening import Hardening, hardening
from pier.sandbox.docker.networks import ensure_internal_network, ensure_sandbox_network
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.dockerfile import CA_PATH, ca_env, read_ca_bundle
from pier.sandbox.fence import admit, fence_bridge, fence_problem
from pier.sandbox.sweeper import owner_label
from pier.settings import Settings

log = logging.getLogger(__name__)

# How long an image found ready stays known without asking the engine again: runs
# of one source in a row skip the lookup. An image removed meanwhile is prepared
# again when create meets the engine's "no such image" (see DockerBackend.create).
IMAGE_CACHE_SEC = 60.0


class DockerBackend(SandboxBackend):
    """Sandboxes as containers on one Docker engine. Connects on first use."""

    name = "docker"

    def __init__(self, settings: Settings, api: docker.APIClient | None = None):
        self._settings = settings
        self._url = engine_url(self._settings)
        if api is not None:
            self.__dict__["api"] = api
        self._ready: dict[tuple[object, ...], tuple[str, float]] = {}
        self._sources: dict[str, SandboxSource] = {}  # image ref -> the source it was prepared from
        self._networks: dict[str, InternalNetwork] = {}  # the networks sandboxes joined, by name
        self._layers: dict[str, tuple[str, LayerRecipe]] = {}  # layer ref -> (its image, its recipe)
        self._layer_ready: dict[tuple[str, LayerRecipe], tuple[str, float]] = {}

    @cached_property
    def api(self) -> docker.APIClient:
        return connect(self._settings)

    @cached_property
    def facts(self) -> EngineFacts:
        with docker_errors("asking the engine what it supports", self._url):
            return engine_facts(self.api.info())

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """No egress allow-list or GPUs yet; a disk limit only where the storage
        driver has quotas (elsewhere the sandbox runs without one, with a note)."""
        return Capabilities(
            network_off=True,
            memory_limit=True,
            cpu_limit=True,
            pids_limit=True,
            disk_quota=self.facts.disk_quota,
        )

    @cached_property
    def hardening(self) -> Hardening:
        """What every sandbox is denied (settings PIER_SANDBOX_*), resolved against
        the runtimes this engine has. Raises SandboxError for a missing runtime."""
        settings = self._settings
        extra = [c for c in settings.sandbox_cap_add.split(",") if c.strip()]
        return hardening(
            extra, settings.sandbox_no_new_privileges, settings.sandbox_runtime, self.facts.runtimes
        )

    @cached_property
    def _ca_bytes(self) -> bytes | None:
        return read_ca_bundle(self._settings.ca_bundle)

    def tls_env(self) -> dict[str, str]:
        return ca_env() if self._ca_bytes else {}

    def ping(self, timeout: float | None = None) -> None:
        try:
            if timeout is None:
                self.api.ping()
            else:  # the SDK's ping takes no timeout; the client is a requests session
                self.api.get(f"{self.api.base_url}/_ping", timeout=timeout).raise_for_status()
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            raise no_engine_error(self._url, exc) from exc

    def image_exists(self, ref: str) -> bool:
        with docker_errors(f"looking up image {ref}", self._url):
            return images.image_exists(self.api, ref)

    def ensure_image(self, source: SandboxSource, log: LineSink, timeout: float) -> str:
        """As the contract says; an image found ready in the last IMAGE_CACHE_SEC is
        not looked up again (one round trip less per run)."""
        key = (source.image, source.dockerfile, source.name, source.files)
        known = self._ready.get(key)
        if known is not None and time.monotonic() - known[1] < IMAGE_CACHE_SEC:
            if source.dockerfile:
                log(f"Using cached image {known[0]}")
            return known[0]
        with docker_errors(f"preparing the image for {source.name}", self._url):
            ref = images.ensure_image(self.api, source, self._ca_bytes, log, timeout)
        self._ready[key] = (ref, time.monotonic())
        self._sources[ref] = source
        return ref

    def ensure_layer(self, image: str, recipe: LayerRecipe, log: LineSink, timeout: float) -> Layer:
        """As the contract says; a layer found in the last IMAGE_CACHE_SEC is not
        looked up again. Marks the layer used (for `pier sweep --images`)."""
        key = (image, recipe)
        known = self._layer_ready.get(key)
        if known is not None and time.monotonic() - known[1] < IMAGE_CACHE_SEC:
            layer = Layer(known[0])
        else:
            with docker_errors(f"preparing the {recipe.name} layer on {image}", self._url):
                layer = layers.ensure_layer(
                    self.api, image, recipe, self._ca_bytes, self._settings.layers_dir, log, timeout
                )
            self._layer_ready[key] = (layer.image, time.monotonic())
            self._layers[layer.image] = (image, recipe)
        layers.mark_used(self._settings.layers_dir, layer.image)
        return layer

    def list_layers(self) -> list[LayerInfo]:
        with docker_errors("listing agent layers", self._url):
            return layers.list_layers(self.api, self._settings.layers_dir)

    def remove_layer(self, image: str) -> bool:
        with docker_errors(f"removing agent layer {image}", self._url):
            removed = layers.remove_layer(self.api, self._settings.layers_dir, image)
        self._layer_ready = {k: v for k, v in self._layer_ready.items() if v[0] != image}
        return removed

    def _prepare_again(self, ref: str) -> bool:
        """The image `ref` is gone from the engine though a lookup said it was
        there (removed since): forget that lookup and prepare it again from its
        source. False when pier never prepared it (nothing to prepare from)."""
        self._ready = {key: known for key, known in self._ready.items() if known[0] != ref}
        self._layer_ready = {key: known for key, known in self._layer_ready.items() if known[0] != ref}
        if ref in self._layers:  # an agent layer pruned meanwhile: build it again
            image, recipe = self._layers[ref]
            log.info(
                "agent layer %s was removed from the engine after it was looked up: building it again", ref
            )
            self.ensure_layer(
                image, recipe, lambda line: log.debug("%s", line), self._settings.agent_install_timeout_sec
            )
            return True
        source = self._sources.get(ref)
        if source is None:
            return False
        log.info("image %s was removed from the engine after it was looked up: preparing it again", ref)
        with docker_errors(f"preparing the image for {source.name}", self._url):
            images.ensure_image(
                self.api, source, self._ca_bytes, lambda line: log.debug("%s", line),
                timeout=self._settings.create_timeout_sec,
            )  # fmt: skip
        return True

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        refuse_unsupported(spec, self.capabilities, self.name)
        spec, fence_note = self._on_fenced_network(spec)
        extra_env = self.tls_env() or None
        plan = plan_container(
            spec, self.facts, owner=owner_label(), extra_env=extra_env, hardening=self.hardening
        )
        with docker_errors(f"creating a sandbox from {spec.image}", self._url):
            try:
                container_id, plan = self._create(plan)
            except docker.errors.ImageNotFound:
                if not self._prepare_again(spec.image):
                    raise
                container_id, plan = self._create(plan)
        sandbox = DockerSandbox(self.api, container_id, self._url)
        sandbox.applied, sandbox.notes = applied_limits(spec, plan, self.facts)
        sandbox.notes += (fence_note,) if fence_note else ()
        try:
            with docker_errors(f"starting sandbox {container_id[:12]}", self._url):
                start_container(self.api, container_id)
            sandbox.defer_files({**self._ca_files(), **spec.files})
        except BaseException:
            sandbox.delete()
            raise
        return sandbox

    def _create(self, plan: ContainerPlan) -> tuple[str, ContainerPlan]:
        """The new container's id, and the plan it was created with."""
        try:
            return create_container(self.api, plan), plan
        except docker.errors.APIError as exc:
            # overlay2 over xfs takes a size only when mounted with pquota, which
            # the engine's info does not say: run without a disk limit then.
            if "storage_opt" not in plan.host or "storage-opt" not in str(exc.explanation):
                raise
            log.debug("disk limit not supported here (%s); creating without it", exc.explanation)
            host = {k: v for k, v in plan.host.items() if k != "storage_opt"}
            without_disk = ContainerPlan(create=plan.create, host=host)
            return create_container(self.api, without_disk), without_disk

    def _ca_files(self) -> dict[str, bytes]:
        """The CA bundle where the sandbox's TLS variables point (set at create)."""
        return {CA_PATH: self._ca_bytes} if self._ca_bytes else {}

    def ensure_internal_network(self, name: str) -> InternalNetwork:
        if name not in self._networks:
            with docker_errors(f"preparing the internal network {name}", self._url):
                self._networks[name] = ensure_internal_network(self.api, name, owner_label())
        return self._networks[name]

    def sandbox_network(self) -> InternalNetwork:
        """The network of sandboxes with network on and no allow-list (made if missing)."""
        name = self._settings.sandbox_network
        if name not in self._networks:
            with docker_errors(f"preparing the sandbox network {name}", self._url):
                self._networks[name] = ensure_sandbox_network(self.api, name, owner_label())
        return self._networks[name]

    def _on_fenced_network(self, spec: SandboxSpec) -> tuple[SandboxSpec, str | None]:
        """The spec on one of pier's networks (the sandbox network unless it names
        the egress network), and why that network's fence is not up, if it is not."""
        if not spec.limits.network:
            return spec, None
        if spec.network_name:
            network = self.ensure_internal_network(spec.network_name)
        else:
            network = self.sandbox_network()
            spec = replace(spec, network_name=network.name)
        why = self._fence(network)
        return spec, (
            f"services on this machine may answer the sandbox at {network.address}: {why}" if why else None
        )

    def _fence(self, network: InternalNetwork) -> str | None:
        why = self._not_local()
        if why:
            return why
        return fence_bridge(network.interface, self._host_allow())

    def _host_allow(self) -> list[tuple[str, int]]:
        """PIER_SANDBOX_HOST_ALLOW as (address, port) pairs."""
        pairs = []
        for entry in (e.strip() for e in self._settings.sandbox_host_allow.split(",")):
            if entry:
                host, _, port = entry.rpartition(":")
                pairs.append((host.strip("[]"), int(port)))
        return pairs

    def _not_local(self) -> str | None:
        """Why pier cannot fence the engine's machine: only that machine's firewall can."""
        if self._url.startswith("unix://") or self._url.startswith("/"):
            return None
        return (
            f"the Docker engine runs at {self._url}, not on this machine, so pier cannot fence off that "
            "machine's services (firewall its Docker bridges there)"
        )

    def host_address(self) -> str | None:
        """The sandbox network's gateway address, where sandboxes reach this
        machine. Only meaningful when the engine runs on this machine."""
        return self.sandbox_network().address

    def admit(self, address: str, port: int) -> str | None:
        return self._not_local() or admit(address, port)

    def isolation_problem(self) -> str | None:
        why = self._not_local() or fence_problem()
        if why:
            return f"sandboxes may reach services on this machine (the fence around them is not up): {why}"
        return None

    def list_sandboxes(self) -> list[SandboxInfo]:
        with docker_errors("listing sandboxes", self._url):
            return list_containers(self.api)

    def remove(self, sandbox_id: str) -> None:
        try:
            api = self.api
        except SandboxError as exc:  # never raises: the sweep or a finally calls this
            log.warning("could not remove sandbox %s: %s", sandbox_id[:12], exc)
            return
        remove_container(api, sandbox_id)

    def attach(self, sandbox_id: str) -> DockerSandbox:
        """The running container with this id. Raises SandboxError."""
        with docker_errors(f"finding sandbox {sandbox_id[:12]}", self._url):
            found = self.api.inspect_container(sandbox_id)
        if not found.get("State", {}).get("Running"):
            raise SandboxError(f"sandbox {sandbox_id[:12]} is not running")
        return DockerSandbox(self.api, found["Id"], self._url)


def applied_limits(
    spec: SandboxSpec, plan: ContainerPlan, facts: EngineFacts
) -> tuple[Limits, tuple[str, ...]]:
    """The limits the container really has, and a note for each that differs."""
    limits = spec.limits
    cpus = plan.host["nano_cpus"] / 1e9
    notes = []
    if cpus < limits.cpus:
        notes.append(f"cpus {limits.cpus:g} lowered to {cpus:g}: the Docker engine has {facts.ncpu} CPU(s)")
    disk = limits.disk if "storage_opt" in plan.host else None
    if limits.disk and not disk:
        notes.append(f"disk limit {limits.disk} not enforced: this engine's storage driver has no quotas")
    return replace(limits, cpus=cpus, disk=disk), tuple(notes)
