"""Images: use what is present, pull what is named, build what is described, and
never rebuild a recipe whose content-hash tag already exists."""

from __future__ import annotations

import io
import re
import tarfile
import threading
import time
from collections import deque
from collections.abc import Iterable

import docker
import docker.errors
import requests

from pier.errors import ImageError
from pier.sandbox.base import LABEL_CREATED, LABEL_RECIPE, LineSink, SandboxSource
from pier.sandbox.docker.streams import iterate_until
from pier.sandbox.dockerfile import CA_CONTEXT_NAME, recipe_hash, recipe_tag, step_titles
from pier.sandbox.tarutil import tar_of_files

ERROR_TAIL_LINES = 30
# Pull progress that would flood the log: one line per layer per chunk.
_NOISY_PULL_STATUS = ("Downloading", "Extracting", "Waiting", "Verifying Checksum")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# How the engine words "the registry cannot be reached" (DNS, routing, firewall,
# proxy): a machine without Docker Hub fails its first run with one of these.
_UNREACHABLE = re.compile(
    r"no such host|dial tcp|i/o timeout|network is unreachable|connection refused|"
    r"TLS handshake timeout|Temporary failure in name resolution|server misbehaving|"
    r"Client\.Timeout exceeded",
    re.IGNORECASE,
)
NO_REGISTRY_HINT = (
    "the engine cannot reach the image registry (no Docker Hub here?): build a local base "
    "image once with `bash scripts/build-test-image.sh` and set PIER_BASE_IMAGE=pier-base:bookworm "
    "(base of generated images) and PIER_SNAPSHOT_BASE_IMAGE=pier-base:bookworm (base of the "
    "built-in snapshots), or pass an image the engine already has with --image; see "
    '"No Docker Hub?" in the README'
)

_build_locks: dict[str, threading.Lock] = {}
_build_locks_guard = threading.Lock()


def image_exists(api: docker.APIClient, ref: str) -> bool:
    try:
        api.inspect_image(ref)
    except docker.errors.NotFound:
        return False
    return True


def read_image_file(api: docker.APIClient, ref: str, path: str, limit: int = 1 << 20) -> bytes | None:
    """One file of image ref, through a container created (never started) and removed
    again; None when the image or the file is missing."""
    try:
        container = api.create_container(ref, command=["true"])
    except docker.errors.NotFound:
        return None
    try:
        stream, _stat = api.get_archive(container["Id"], path)
        data = b"".join(stream)
    except docker.errors.NotFound:
        return None
    finally:
        api.remove_container(container["Id"], force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = next((m for m in tar.getmembers() if m.isfile() and m.size <= limit), None)
        extracted = tar.extractfile(member) if member else None
        return extracted.read() if extracted else None


def registry_has(api: docker.APIClient, ref: str) -> bool:
    """Whether ref's registry has it: its manifest, asked through the engine (so
    the engine's own registry settings and credentials apply). ImageError when
    the registry cannot tell: not reachable, or refusing without credentials."""
    try:
        api.inspect_distribution(ref)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        raise ImageError(f"its registry could not tell ({exc.explanation or exc})") from None
    return True


def ensure_image(
    api: docker.APIClient,
    source: SandboxSource,
    ca_bytes: bytes | None,
    log: LineSink,
    timeout: float,
) -> str:
    """An image ref ready to run for source. Raises ImageError."""
    if source.image:
        if not image_exists(api, source.image):
            pull_image(api, source.image, log, timeout)
        return source.image
    if not source.dockerfile:
        raise ImageError(f"sandbox source {source.name!r} names neither an image nor a Dockerfile")
    tag = recipe_tag(source.name, source.dockerfile, ca_bytes, source.files)
    deadline = time.monotonic() + timeout
    # Concurrent runs of one recipe in this process build it once; the others wait.
    lock = _lock_for(tag)
    if not lock.acquire(timeout=timeout):
        raise ImageError(f"Another run's build of {tag} took more than {timeout:.0f}s")
    try:
        if image_exists(api, tag):
            log(f"Using cached image {tag}")
            return tag
        build_image(api, tag, source.dockerfile, ca_bytes, log, deadline - time.monotonic(), source.files)
    finally:
        lock.release()
    return tag


def _lock_for(tag: str) -> threading.Lock:
    with _build_locks_guard:
        return _build_locks.setdefault(tag, threading.Lock())


def registry_hint(reason: str) -> str:
    """What to do when reason says the registry is out of reach; else ''."""
    return f" ({NO_REGISTRY_HINT})" if _UNREACHABLE.search(reason) else ""


def _pull_hint(ref: str) -> str:
    return (
        f"check that `docker pull {ref}` works without logging in "
        "(pier uses no registry credentials) and that the reference is right"
    )


def pull_image(api: docker.APIClient, ref: str, log: LineSink, timeout: float) -> None:
    log(f"Pulling image {ref}")
    deadline = time.monotonic() + timeout
    try:
        # auth_config={}: never the host's saved logins, so what runs here runs anywhere.
        events = iterate_until(lambda: api.pull(ref, stream=True, decode=True, auth_config={}), deadline)
        _follow_pull(events, log)
    except TimeoutError as exc:
        raise ImageError(f"Pulling {ref} took more than {timeout:.0f}s: {_pull_hint(ref)}") from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        reason = _reason(exc)
        hint = (
            f"{NO_REGISTRY_HINT}; where it can, {_pull_hint(ref)}"
            if registry_hint(reason)
            else _pull_hint(ref)
        )
        raise ImageError(f"Could not pull {ref} ({reason}): {hint}") from exc
    if not image_exists(api, ref):
        raise ImageError(f"Pulled {ref} but the engine does not list it: {_pull_hint(ref)}")


def _follow_pull(events: Iterable[dict], log: LineSink) -> None:
    for event in events:
        if "error" in event:
            raise docker.errors.DockerException(event["error"])
        status = str(event.get("status", ""))
        if status and not status.startswith(_NOISY_PULL_STATUS):
            layer = event.get("id")
            log(f"{layer}: {status}" if layer else status)


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc).strip()


def build_image(
    api: docker.APIClient,
    tag: str,
    dockerfile: str,
    ca_bytes: bytes | None,
    log: LineSink,
    timeout: float,
    files: tuple[tuple[str, bytes], ...] = (),
) -> None:
    """Build dockerfile as tag, streaming its log lines to log. Raises ImageError
    with the build's last lines when it fails or runs past timeout."""
    log(f"Building image {tag}")
    labels = {
        LABEL_RECIPE: recipe_hash(dockerfile, ca_bytes, files),
        LABEL_CREATED: str(int(time.time())),
    }
    context_files = {**dict(files), "Dockerfile": dockerfile.encode()}  # the recipe's own files too
    if ca_bytes:
        context_files[CA_CONTEXT_NAME] = ca_bytes
    build_with_context(api, tag, context_files, labels, progress_lines(dockerfile, log), timeout)


_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$", re.DOTALL)
STEP_SHOWN = 160  # characters of an unnamed step's instruction shown


def progress_lines(dockerfile: str, log: LineSink) -> LineSink:
    """log, with the builder's "Step N/M : <instruction>" lines named: a recipe's
    `# pier-step:` title when it gives one ("layer 7/23: Python 3.12 as python3"),
    else the instruction cut short (a step can be kilobytes of shell)."""
    titles = step_titles(dockerfile)

    def sink(line: str) -> None:
        found = _STEP.match(line)
        if found is None:
            log(line)
            return
        number, total, instruction = found.groups()
        title = titles.get(int(number))
        if title:
            log(f"layer {number}/{total}: {title}")
        else:
            cut = instruction if len(instruction) <= STEP_SHOWN else instruction[:STEP_SHOWN] + " ..."
            log(f"layer {number}/{total}: {cut}")

    return sink


def build_with_context(
    api: docker.APIClient,
    tag: str,
    files: dict[str, bytes],
    labels: dict[str, str],
    log: LineSink,
    timeout: float,
    nocache: bool = False,
) -> None:
    """Build the context `files` (its Dockerfile among them) as tag (nocache: every
    step runs again). Raises ImageError with the build's last lines when it fails
    or runs past timeout."""
    context = tar_of_files(files)
    tail: deque[str] = deque(maxlen=ERROR_TAIL_LINES)

    def open_build() -> Iterable[dict]:
        return api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
            nocache=nocache,
            decode=True,
        )

    try:
        _follow_build(iterate_until(open_build, time.monotonic() + timeout), log, tail)
    except TimeoutError as exc:
        raise _build_error(tag, f"took more than {timeout:.0f}s", tail) from exc
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise _build_error(tag, _reason(exc), tail) from exc
    if not image_exists(api, tag):
        raise _build_error(tag, "the engine reported no image", tail)


def _follow_build(events: Iterable[dict], log: LineSink, tail: deque[str]) -> None:
    # The builder sends text in pieces that do not end at line ends, and colours a
    # step's stderr with ANSI codes: rejoin lines and drop the codes.
    partial = ""

    def emit(line: str) -> None:
        if line.strip():
            tail.append(line)
            log(line)

    for event in events:
        if "error" in event:
            raise docker.errors.BuildError(event["error"].strip(), build_log=[])
        *lines, partial = (partial + _ANSI.sub("", str(event.get("stream", "")))).split("\n")
        for line in lines:
            emit(line)
    emit(partial)


def _build_error(tag: str, reason: str, tail: Iterable[str]) -> ImageError:
    last = "\n".join(tail)
    return ImageError(f"Building {tag} failed: {reason}{registry_hint(reason)}. Last build lines:\n{last}")
