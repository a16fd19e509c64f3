"""Agent layers: an image built FROM a run's image with the agent's install script
run once, tagged by a hash of (image id, agent, version, script) and reused by
every later sandbox of that image and agent. Built by the engine's builder from
the image itself, never committed from a sandbox, so it holds nothing of a run.

Concurrent first runs build it once: a lock per tag in this process, and a file
lock beside it for other pier processes sharing the engine and PIER_HOME (two
`pier run`s, a server and a worker). When this machine last used a layer is the
mtime of a file named after it (Docker keeps no such time), for pruning by age."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

from pier.errors import ImageError
from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_LAYER,
    LABEL_LAYER_BASE,
    LABEL_LAYER_VERSION,
    Layer,
    LayerInfo,
    LayerRecipe,
    LineSink,
)
from pier.sandbox.docker.images import build_with_context, image_exists
from pier.sandbox.dockerfile import CA_CONTEXT_NAME, ca_env

LAYER_REPO = "pier-agent"
SCRIPT_NAME = "pier-layer.sh"
LAYER_FORMAT = "1"  # bump when layer_dockerfile changes what a layer holds
# A background build that failed (a registry down, a pin that does not exist)
# is not started again by every run for this long: each run installs in its
# own sandbox meanwhile, as when the layer was missing, and the engine is not
# made to build a failing install once per run.
FAILED_BUILD_RETRY_SEC = 600
# What an install leaves that no run needs (caches, the script itself).
CLEAN = f"rm -rf /tmp/{SCRIPT_NAME} /tmp/pier-ca.crt /root/.npm /root/.cache/pip /root/.cache/uv"

_BUILDER_NOISE = (
    "Step ",
    " ---> ",
    "Removing intermediate container",
    "Successfully built",
    "Successfully tagged",
)

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def layer_tag(image_id: str, recipe: LayerRecipe, ca_bytes: bytes | None) -> str:
    digest = hashlib.sha256()
    for part in (LAYER_FORMAT, image_id, recipe.name, recipe.version, recipe.script):
        digest.update(part.encode() + b"\0")
    if ca_bytes:
        digest.update(ca_bytes)
    return f"{LAYER_REPO}/{recipe.name}:{digest.hexdigest()[:16]}"


def layer_dockerfile(image_id: str, ca: bool, labels: dict[str, str]) -> str:
    """Root for the install (the sandbox runs as root anyway); the CA bundle, when
    pier has one, only for the install's own downloads, then gone. Few steps: each
    is a container the builder makes and removes."""
    env = " ".join(f"{name}=/tmp/{CA_CONTEXT_NAME}" for name in ca_env()) + " " if ca else ""
    copied = f"{SCRIPT_NAME} {CA_CONTEXT_NAME}" if ca else SCRIPT_NAME
    label = " ".join(f"{key}={json.dumps(value)}" for key, value in labels.items())
    return (
        f"FROM {image_id}\nUSER root\nCOPY {copied} /tmp/\n"
        f"RUN {env}bash /tmp/{SCRIPT_NAME} && {CLEAN}\nLABEL {label}\n"
    )


def _install_lines(log: LineSink) -> LineSink:
    """The install script's own lines; not the builder's step bookkeeping."""

    def emit(line: str) -> None:
        if not line.startswith(_BUILDER_NOISE):
            log(line)

    return emit


def ensure_layer(
    api: docker.APIClient,
    image: str,
    recipe: LayerRecipe,
    ca_bytes: bytes | None,
    lock_dir: Path,
    log: LineSink,
    timeout: float,
) -> Layer:
    """The layer of recipe on image, built when missing. Raises ImageError."""
    image_id = str(api.inspect_image(image)["Id"])
    tag = layer_tag(image_id, recipe, ca_bytes)
    if image_exists(api, tag):
        return Layer(tag)
    with _locked(tag, lock_dir, timeout):
        if image_exists(api, tag):  # another run built it while this one waited
            return Layer(tag)
        began = time.monotonic()
        build_layer(api, image, image_id, tag, recipe, ca_bytes, log, timeout)
        return Layer(tag, built_s=time.monotonic() - began)


def find_layer(api: docker.APIClient, image: str, recipe: LayerRecipe, ca_bytes: bytes | None) -> Layer:
    """The layer of recipe on image: ready when it exists, else not (nothing built)."""
    tag = layer_tag(str(api.inspect_image(image)["Id"]), recipe, ca_bytes)
    return Layer(tag, ready=image_exists(api, tag))


def build_layer(
    api: docker.APIClient,
    image: str,
    image_id: str,
    tag: str,
    recipe: LayerRecipe,
    ca_bytes: bytes | None,
    log: LineSink,
    timeout: float,
) -> None:
    """Build the layer tag (the caller holds its lock). Raises ImageError."""
    labels = {
        LABEL_LAYER: recipe.name,
        LABEL_LAYER_VERSION: recipe.version,
        LABEL_LAYER_BASE: image,
        LABEL_CREATED: str(int(time.time())),
    }
    dockerfile = layer_dockerfile(image_id, bool(ca_bytes), labels)
    files = {"Dockerfile": dockerfile.encode(), SCRIPT_NAME: recipe.script.encode()}
    if ca_bytes:
        files[CA_CONTEXT_NAME] = ca_bytes
    try:
        # No build cache: a layer built again (pruned, or its tag removed) really
        # installs, rather than re-tagging the steps of the build it replaces.
        build_with_context(api, tag, files, {}, _install_lines(log), timeout, nocache=True)
    except ImageError as exc:
        what = recipe.title or f"{recipe.name} {recipe.version}"
        raise ImageError(
            f"installing {what} into an agent layer on {image} failed: {exc}\n"
            "Check that the engine's builds reach the package registry, or use an image that has "
            "the CLI at this version."
        ) from exc


def start_build(
    api: docker.APIClient,
    image: str,
    recipe: LayerRecipe,
    ca_bytes: bytes | None,
    lock_dir: Path,
    docker_host: str | None,
    timeout: float,
) -> bool:
    """Build the layer in a detached process (it outlives the caller, a one-shot
    `pier run` as well as a server) and return at once: True when this call started
    it; False when the layer exists or another build of it holds the lock. The
    process is handed the lock this call took, so the lock is held from before this
    returns until the build ends: wait_for_build waits on it, with no race."""
    image_id = str(api.inspect_image(image)["Id"])
    tag = layer_tag(image_id, recipe, ca_bytes)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{_file_name(tag)}.lock", "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # another process (or a thread of this one) is building it
        if image_exists(api, tag):
            return False  # built since it was looked up (the lock goes with the file's close)
        _refuse_if_failed_lately(lock_dir, tag)
        job = {
            "image": image,
            "image_id": image_id,
            "tag": tag,
            "recipe": dataclasses.asdict(recipe),
            "ca": base64.b64encode(ca_bytes).decode() if ca_bytes else None,
            "docker_host": docker_host,
            "timeout": timeout,
            "lock_fd": handle.fileno(),
        }
        job_path = lock_dir / f"{_file_name(tag)}.job.json"
        job_path.write_text(json.dumps(job))
        with open(build_log_path(lock_dir, tag), "w") as out:
            subprocess.Popen(
                [sys.executable, "-m", "pier.sandbox.docker.layer_build", str(job_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(handle.fileno(),),
                start_new_session=True,  # not stopped with the caller's terminal or process group
            )
    return True


def build_log_path(lock_dir: Path, tag: str) -> Path:
    """Where a background build of tag writes its output (the last one's stays)."""
    return lock_dir / f"{_file_name(tag)}.build.log"


def failed_build_path(lock_dir: Path, tag: str) -> Path:
    """Present while the last background build of tag failed; its mtime says when."""
    return lock_dir / f"{_file_name(tag)}.failed"


def _refuse_if_failed_lately(lock_dir: Path, tag: str) -> None:
    """ImageError when the last background build of tag failed less than
    FAILED_BUILD_RETRY_SEC ago, naming its output and when it is tried again."""
    try:
        age = time.time() - failed_build_path(lock_dir, tag).stat().st_mtime
    except FileNotFoundError:
        return
    if age >= FAILED_BUILD_RETRY_SEC:
        return
    raise ImageError(
        f"the last build of {tag} failed {age:.0f} s ago (its output: {build_log_path(lock_dir, tag)}); "
        f"it is tried again in {FAILED_BUILD_RETRY_SEC - age:.0f} s, and runs install the CLI in their "
        "sandbox until then"
    )


def wait_for_build(api: docker.APIClient, image: str, recipe: LayerRecipe, ca_bytes: bytes | None,
                   lock_dir: Path, timeout: float) -> bool:  # fmt: skip
    """Wait until no build of the layer holds its lock; whether the layer exists."""
    tag = layer_tag(str(api.inspect_image(image)["Id"]), recipe, ca_bytes)
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{_file_name(tag)}.lock", "a") as handle:
        _flock(handle.fileno(), tag, timeout)
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return image_exists(api, tag)


@contextlib.contextmanager
def _locked(tag: str, lock_dir: Path, timeout: float) -> Iterator[None]:
    with _locks_guard:
        lock = _locks.setdefault(tag, threading.Lock())
    if not lock.acquire(timeout=timeout):
        raise ImageError(f"another run's build of the agent layer {tag} took more than {timeout:.0f}s")
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
        path = lock_dir / f"{_file_name(tag)}.lock"
        with open(path, "a") as handle:
            _flock(handle.fileno(), tag, timeout)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        lock.release()


def _flock(fd: int, tag: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ImageError(
                    f"another pier process's build of the agent layer {tag} took more than {timeout:.0f}s"
                ) from None
            time.sleep(0.2)


def _file_name(tag: str) -> str:
    return tag.replace("/", "_").replace(":", "_")


def mark_used(use_dir: Path, tag: str) -> None:
    """Remember that a sandbox of this layer was made now (for pruning by age)."""
    with contextlib.suppress(OSError):
        use_dir.mkdir(parents=True, exist_ok=True)
        path = use_dir / _file_name(tag)
        path.touch()
        os.utime(path)


def list_layers(api: docker.APIClient, use_dir: Path) -> list[LayerInfo]:
    found = []
    for image in api.images(filters={"label": LABEL_LAYER}):
        labels = image.get("Labels") or {}
        tags = [t for t in image.get("RepoTags") or [] if t.startswith(f"{LAYER_REPO}/")]
        if not tags:
            continue
        used = use_dir / _file_name(tags[0])
        found.append(
            LayerInfo(
                image=tags[0],
                name=labels.get(LABEL_LAYER, ""),
                version=labels.get(LABEL_LAYER_VERSION, ""),
                base=labels.get(LABEL_LAYER_BASE, ""),
                size=int(image.get("Size") or 0),
                created=float(labels.get(LABEL_CREATED) or image.get("Created") or 0),
                last_used=used.stat().st_mtime if used.exists() else None,
            )
        )
    return sorted(found, key=lambda info: (info.name, info.base, -info.created))


def remove_layer(api: docker.APIClient, use_dir: Path, tag: str) -> bool:
    """Remove a layer image; False when a container (of any state) still uses it."""
    if not tag.startswith(f"{LAYER_REPO}/"):
        raise ImageError(f"{tag} is not an agent layer ({LAYER_REPO}/...): pier removes only its own")
    try:
        api.remove_image(tag, force=False, noprune=False)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # a container uses it
            return False
        raise
    with contextlib.suppress(OSError):
        (use_dir / _file_name(tag)).unlink()
    return True
