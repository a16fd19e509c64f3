"""The Docker engine as a SandboxBackend: wires images, containers and execs."""

from __future__ import annotations

import json
import logging
import os
import tarfile
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from pathlib import Path

import docker
import docker.errors
import requests

from pier.errors import CapabilityError, SandboxError, VolumeInUse
from pier.limits import parse_size
from pier.sandbox.base import (
    LABEL_RUN,
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
    VolumeInfo,
    VolumeMount,
)
from pier.sandbox.capabilities import refuse_unsupported, unenforced_notes
from pier.sandbox.docker import diskguard, images, layers
from pier.sandbox.docker.client import (
    EngineFacts,
    connect,
    docker_errors,
    engine_facts,
    engine_is_local,
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
from pier.sandbox.docker.diskguard import DiskWatch, LoopDisk
from pier.sandbox.docker.fence import admit, fence_bridge, fence_problem
from pier.sandbox.docker.hardening import Hardening, hardening, runtime_reason
from pier.sandbox.docker.networks import ensure_internal_network, ensure_sandbox_network
from pier.sandbox.docker.oomwatch import OomWatch, can_watch
from pier.sandbox.docker.retrying import RetryingEngine
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.dockerfile import CA_PATH, ca_env, read_ca_bundle
from pier.sandbox.owner import owner_label
from pier.sandbox.tarutil import tar_members
from pier.settings import Settings

log = logging.getLogger(__name__)

# How long an image found ready stays known without asking the engine again: runs
# of one source in a row skip the lookup. An image removed meanwhile is prepared
# again when create meets the engine's "no such image" (see DockerBackend.create).
IMAGE_CACHE_SEC = 60.0
RUNSC_TMP_KEEP = "tmp/.pier-tmp-on-disk"
TAR_END = b"\0" * (2 * tarfile.BLOCKSIZE)
GVISOR_PIDS_FACTOR, GVISOR_PIDS_BASE = 8, 256


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
        self._disks = DiskWatch(stop=self._stop_for_disk)
        self._spares = diskguard.Spares(settings.disk_guard_root, settings.disk_guard_spares)

    @cached_property
    def api(self) -> docker.APIClient:
        """The engine's client; its calls that may be repeated are tried again
        after a transient engine error (retrying.py)."""
        return RetryingEngine(connect(self._settings), self._settings.engine_retry_sec)

    @cached_property
    def facts(self) -> EngineFacts:
        with docker_errors("asking the engine what it supports", self._url):
            return engine_facts(self.api.info())

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """No egress allow-list or GPUs yet; a disk limit by the storage driver's
        quota where it has one, else by the disk guard where it can be installed."""
        return Capabilities(
            network_off=True,
            memory_limit=True,
            cpu_limit=True,
            pids_limit=not self._on_gvisor,
            disk_quota=self.facts.disk_quota or self.disk_guard_missing is None,
            volumes=True,
        )

    @property
    def runtime(self) -> str:
        """The OCI runtime this backend's sandboxes run under (named, or the engine's default)."""
        return self.hardening.runtime or self.facts.default_runtime

    def runtime_reason(self) -> str:
        settings = self._settings
        return runtime_reason(
            settings.sandbox_runtime, self.hardening.runtime, self.facts.default_runtime, self.facts.runtimes
        )

    @property
    def _on_gvisor(self) -> bool:
        return self.hardening.runtime == "runsc"

    @cached_property
    def disk_guard_missing(self) -> str | None:
        """Why the disk guard cannot be installed on this engine, or None when it can."""
        if self.facts.storage_driver != "overlay2":
            return f"the engine's storage driver {self.facts.storage_driver!r} is not overlay2"
        return diskguard.guard_available(self.facts.root_dir, engine_is_local(self._url))

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

    def registry_has(self, ref: str) -> bool | None:
        """The engine asks ref's registry for its manifest, as a pull would first."""
        with docker_errors(f"looking up image {ref} in its registry", self._url):
            return images.registry_has(self.api, ref)

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

    def image_id(self, ref: str) -> str | None:
        try:
            with docker_errors(f"looking up the image {ref}", self._url):
                found = self.api.inspect_image(ref)
        except SandboxError:
            return None
        return str(found.get("Id") or "") or None

    def image_labels(self, ref: str) -> dict[str, str]:
        try:
            with docker_errors(f"looking up the image {ref}", self._url):
                found = self.api.inspect_image(ref)
        except SandboxError:
            return {}
        return dict((found.get("Config") or {}).get("Labels") or {})

    def image_file(self, ref: str, path: str) -> bytes | None:
        try:
            with docker_errors(f"reading {path} from the image {ref}", self._url):
                return images.read_image_file(self.api, ref, path)
        except SandboxError:
            return None

    def ensure_layer(
        self, image: str, recipe: LayerRecipe, log: LineSink, timeout: float, wait: bool = True
    ) -> Layer:
        """As the contract says; a layer found in the last IMAGE_CACHE_SEC is not
        looked up again. Marks the layer used (for `pier sweep --images`)."""
        key = (image, recipe)
        known = self._layer_ready.get(key)
        if known is not None and time.monotonic() - known[1] < IMAGE_CACHE_SEC:
            layer = Layer(known[0])
        elif not wait:
            with docker_errors(f"looking up the {recipe.name} layer on {image}", self._url):
                layer = layers.find_layer(self.api, image, recipe, self._ca_bytes)
            if not layer.ready:
                return layer
        else:
            with docker_errors(f"preparing the {recipe.name} layer on {image}", self._url):
                layer = layers.ensure_layer(
                    self.api, image, recipe, self._ca_bytes, self._settings.layers_dir, log, timeout
                )
        self._layer_ready[key] = (layer.image, time.monotonic())
        self._layers[layer.image] = (image, recipe)
        layers.mark_used(self._settings.layers_dir, layer.image)
        return layer

    def start_layer_build(self, image: str, recipe: LayerRecipe, timeout: float) -> bool:
        with docker_errors(f"starting the build of the {recipe.name} layer on {image}", self._url):
            return layers.start_build(self.api, image, recipe, self._ca_bytes, self._settings.layers_dir,
                                      self._settings.docker_host, timeout)  # fmt: skip

    def wait_for_layer_build(self, image: str, recipe: LayerRecipe, timeout: float) -> bool:
        with docker_errors(f"waiting for the build of the {recipe.name} layer on {image}", self._url):
            return layers.wait_for_build(self.api, image, recipe, self._ca_bytes, self._settings.layers_dir,
                                         timeout)  # fmt: skip

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
        if spec.limits.disk and not self.capabilities.disk_quota:
            raise CapabilityError(
                f"this sandbox asks for a disk limit of {spec.limits.disk} (capability disk_quota), which "
                f"the {self.name!r} sandbox backend cannot enforce here: {self.disk_guard_missing}. Use a "
                "storage driver with quotas (overlay2 on xfs mounted with pquota, btrfs, zfs), run pier as "
                "root on the engine's host (the disk guard needs mkfs.ext4 and mount), or set "
                "PIER_DISK_LIMIT= (empty) to run without a disk limit"
            )
        refuse_unsupported(spec, self.capabilities, self.name)
        self._ensure_volumes(spec.volumes)
        spec, fence_note = self._on_fenced_network(spec)
        extra_env = self.tls_env() or None
        plan = plan_container(
            spec, self.facts, owner=owner_label(), extra_env=extra_env, hardening=self.hardening
        )
        if self._pier_kills_for_memory:
            plan.host["oom_kill_disable"] = True  # pier's OOM watch kills instead (see oomwatch)
        if self._on_gvisor:
            # The host counts gVisor's own threads and stubs (about 40 at rest, several
            # per sandbox process), and gVisor dies rather than refuse a fork at the
            # host's limit: a ceiling far above the asked one only stops a fork bomb.
            plan.host["pids_limit"] = spec.limits.pids * GVISOR_PIDS_FACTOR + GVISOR_PIDS_BASE
        with docker_errors(f"creating a sandbox from {spec.image}", self._url):
            try:
                container_id, plan = self._create(plan)
            except docker.errors.ImageNotFound:
                if not self._prepare_again(spec.image):
                    raise
                container_id, plan = self._create(plan)
        sandbox = self._sandbox(container_id, stdin_fresh=True)
        try:
            disk = self._guard_disk(spec, plan, container_id)
            sandbox.applied, sandbox.notes = applied_limits(spec, plan, self.facts, guarded=disk is not None)
            sandbox.notes += unenforced_notes(spec, self.capabilities, self.name)
            sandbox.notes += (fence_note,) if fence_note else ()
            self._before_start(container_id)
            with docker_errors(f"starting sandbox {container_id[:12]}", self._url):
                start_container(self.api, container_id)
                if self._pier_kills_for_memory:
                    self._oom.add(container_id, parse_size(spec.limits.memory))
            sandbox.defer_files({**self._ca_files(), **spec.files})
        except BaseException:
            sandbox.delete()
            raise
        return sandbox

    def _guard_disk(self, spec: SandboxSpec, plan: ContainerPlan, container_id: str) -> LoopDisk | None:
        """Put the created container's writable layer on a filesystem of the disk
        limit's size, where the engine did not take the limit itself."""
        if not spec.limits.disk or "storage_opt" in plan.host:
            return None
        if self.disk_guard_missing is not None:  # refuse_unsupported let it through: a quota driver
            raise SandboxError(f"the disk limit cannot be enforced: {self.disk_guard_missing}")
        upper = diskguard.upper_dir(self.facts.root_dir, container_id)
        if upper is None:  # not where overlay2 keeps it: the engine says
            with docker_errors(f"inspecting sandbox {container_id[:12]}", self._url):
                upper = self.api.inspect_container(container_id)["GraphDriver"]["Data"]["UpperDir"]
        size = parse_size(spec.limits.disk)
        disk = diskguard.install(
            container_id, upper, spec.limits.disk, size, self._settings.disk_guard_root, self._spares
        )
        self._disks.add(disk)
        return disk

    def _before_start(self, container_id: str) -> None:
        """What a runtime needs in the root filesystem before the sandbox starts."""
        if self.hardening.runtime == "runsc":
            # gVisor mounts a tmpfs of its own (in memory, unseen from the host) over
            # an empty /tmp; a file in it keeps /tmp on the sandbox's disk.
            with docker_errors(f"preparing sandbox {container_id[:12]}", self._url):
                self.api.put_archive(container_id, "/", tar_members({RUNSC_TMP_KEEP: b""}) + TAR_END)

    @cached_property
    def _pier_kills_for_memory(self) -> bool:
        """Whether pier's OOM watch, not the host kernel, kills for memory: on gVisor,
        where the kernel would kill the whole sandbox, and where pier can (root on
        the engine's host, cgroup v1)."""
        local = engine_is_local(self._url) and os.geteuid() == 0
        return self.hardening.runtime == "runsc" and local and can_watch()

    @cached_property
    def _oom(self) -> OomWatch:
        return OomWatch(self.api)

    def _sandbox(self, container_id: str, stdin_fresh: bool = False) -> DockerSandbox:
        """The sandbox object; stdin_fresh for one this process made, whose
        keep-alive still waits for its first archive (keepalive.py)."""
        return DockerSandbox(
            self.api,
            container_id,
            self._url,
            self._disks,
            self._settings.disk_guard_root,
            files_by_exec=self.hardening.runtime == "runsc",
            oom=self._oom if self._pier_kills_for_memory else None,
            stdin_fresh=stdin_fresh,
        )

    def _stop_for_disk(self, container_id: str) -> None:
        try:
            self.api.kill(container_id)
        except Exception as exc:  # gone already: stopped either way
            log.debug("could not stop sandbox %s: %s", container_id[:12], exc)

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
        if self._pier_kills_for_memory:
            self._oom.discard(sandbox_id)
        disk = self._disks.discard(sandbox_id)
        diskguard.release(self._settings.disk_guard_root, sandbox_id, disk.mountpoint if disk else None)

    def commit(self, sandbox_id: str, ref: str, labels: Mapping[str, str]) -> str:
        repository, _, tag = ref.rpartition(":")
        changes = [f"LABEL {json.dumps(key)}={json.dumps(value)}" for key, value in labels.items()]
        with docker_errors(f"saving sandbox {sandbox_id[:12]} as {ref}", self._url):
            self.api.commit(sandbox_id, repository=repository, tag=tag, changes=changes, pause=True)
        self._ready.clear()  # a ref cached as ready may now name other files
        return ref

    def pause(self, sandbox_id: str) -> None:
        with docker_errors(f"pausing sandbox {sandbox_id[:12]}", self._url):
            if not self._state(sandbox_id).get("Paused"):
                self.api.pause(sandbox_id)

    def resume(self, sandbox_id: str) -> None:
        with docker_errors(f"resuming sandbox {sandbox_id[:12]}", self._url):
            if self._state(sandbox_id).get("Paused"):
                self.api.unpause(sandbox_id)

    def paused(self, sandbox_id: str) -> bool:
        try:
            return bool(self._state(sandbox_id).get("Paused"))
        except Exception:  # gone, or no engine: not paused
            return False

    def _state(self, sandbox_id: str) -> dict:
        return self.api.inspect_container(sandbox_id).get("State") or {}

    def _ensure_volumes(self, volumes: tuple[VolumeMount, ...]) -> None:
        """Each named volume made with its labels when it is not there yet (the
        engine would make a missing one at create, but without labels, which
        are how pier lists a collection's and refuses another's)."""
        for volume in volumes:
            with docker_errors(f"preparing volume {volume.name}", self._url):
                try:
                    found = self.api.inspect_volume(volume.name)
                except docker.errors.NotFound:
                    self.api.create_volume(volume.name, labels=dict(volume.labels))
                    continue
            theirs = found.get("Labels") or {}
            wrong = {key: value for key, value in volume.labels.items() if theirs.get(key) != value}
            if wrong:  # a volume of that name pier did not make for this owner: never mounted
                raise SandboxError(
                    f"the engine's volume {volume.name} is not this collection's (its labels {theirs}); "
                    "remove it on the engine or rename the volume in the runbook"
                )

    def list_volumes(self, labels: Mapping[str, str]) -> list[VolumeInfo]:
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        with docker_errors("listing volumes", self._url):
            found = self.api.volumes(filters=filters).get("Volumes") or []
            names = {volume["Name"] for volume in found}
            using: dict[str, int] = {}
            paths: dict[str, set[str]] = {}
            for container in self.api.containers(all=True, filters={"label": LABEL_RUN}):
                for mount in container.get("Mounts") or []:
                    if mount.get("Type") == "volume" and mount.get("Name") in names:
                        using[mount["Name"]] = using.get(mount["Name"], 0) + 1
                        if mount.get("Destination"):
                            paths.setdefault(mount["Name"], set()).add(mount["Destination"])
        return [
            VolumeInfo(
                name=volume["Name"],
                labels=volume.get("Labels") or {},
                created=volume.get("CreatedAt"),
                in_use=using.get(volume["Name"], 0),
                paths=tuple(sorted(paths.get(volume["Name"], ()))),
            )
            for volume in found
        ]

    def remove_volume(self, name: str) -> bool:
        with docker_errors(f"removing volume {name}", self._url):
            try:
                self.api.remove_volume(name)
            except docker.errors.NotFound:
                return False
            except docker.errors.APIError as exc:
                if exc.status_code == 409:
                    raise VolumeInUse(
                        f"volume {name} is in use by a sandbox (a run, or a kept sandbox): "
                        "remove it when no sandbox mounts it"
                    ) from None
                raise
        return True

    def remove_image(self, ref: str) -> bool:
        try:
            self.api.remove_image(ref, force=False, noprune=False)
        except Exception as exc:  # missing, in use, or no engine: nothing removed
            log.debug("could not remove image %s: %s", ref, exc)
            return False
        self._ready.clear()
        return True

    def attach(self, sandbox_id: str) -> DockerSandbox:
        """The running container with this id. Raises SandboxError."""
        with docker_errors(f"finding sandbox {sandbox_id[:12]}", self._url):
            found = self.api.inspect_container(sandbox_id)
        if not found.get("State", {}).get("Running"):
            raise SandboxError(f"sandbox {sandbox_id[:12]} is not running")
        self._rewatch(found)
        return self._sandbox(found["Id"])

    def _rewatch(self, found: dict) -> None:
        """A guarded sandbox made by another process is watched here too."""
        container_id = found["Id"]
        image = diskguard.image_path(self._settings.disk_guard_root, container_id)
        if self._disks.get(container_id) is not None or not image.exists():
            return
        upper = found.get("GraphDriver", {}).get("Data", {}).get("UpperDir")
        if upper:
            limit = f"{image.stat().st_size >> 20}M"
            self._disks.add(LoopDisk(container_id, limit, image.stat().st_size, image, Path(upper).parent))


def applied_limits(
    spec: SandboxSpec, plan: ContainerPlan, facts: EngineFacts, *, guarded: bool = False
) -> tuple[Limits, tuple[str, ...]]:
    """The limits the container really has, and a note for each that differs."""
    limits = spec.limits
    cpus = plan.host["nano_cpus"] / 1e9
    notes = []
    if cpus < limits.cpus:
        notes.append(f"cpus {limits.cpus:g} lowered to {cpus:g}: the Docker engine has {facts.ncpu} CPU(s)")
    disk = limits.disk if "storage_opt" in plan.host or guarded else None
    return replace(limits, cpus=cpus, disk=disk), tuple(notes)
