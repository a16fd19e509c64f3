"""A disk limit on storage drivers without quotas (overlay2 on ext4, the usual).

The container's writable layer (the overlay upper and work dirs, under the
engine's data root) is moved onto a filesystem of its own: a sparse file of the
limit's size, formatted ext4 and loop-mounted over the layer's folder after the
container is created and before it starts. Every write the sandbox makes (any
path: /tmp, /app, /var, /usr...) lands there, so the kernel refuses writes past
the limit (ENOSPC) and the host loses at most the file's size. A poller
(DiskWatch) stops a sandbox whose filesystem is full, so its run fails naming
the limit instead of limping on.

Needs: pier runs as root on the engine's host, in its mount namespace (the
engine's data root is visible here), with mkfs.ext4 and mount. The engine's own
removal of the container unmounts the filesystem (it unmounts what is mounted
under a layer it deletes); `release` removes the file, and unmounts first when
the engine did not.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pier.errors import SandboxError

log = logging.getLogger(__name__)

POLL_S = 0.5
# Full: less free than this (ENOSPC leaves a few blocks), or no inode left.
FULL_FREE_BYTES = 4 << 20
TOOLS = ("mkfs.ext4", "mount", "umount")
# No journal (the file is thrown away with the sandbox, a crash loses nothing
# worth keeping), no blocks reserved for root (the agent is root), inode tables
# initialised lazily (a 10G filesystem is made in a fraction of a second).
MKFS_OPTIONS = ("-q", "-F", "-O", "^has_journal", "-m", "0", "-E", "lazy_itable_init=1,nodiscard")


def guard_available(root_dir: str | None, engine_is_local: bool) -> str | None:
    """None when a disk guard can be installed here, else why not (for the refusal)."""
    if not engine_is_local:
        return "the Docker engine is not on this machine"
    if os.geteuid() != 0:
        return "pier does not run as root"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    if not root_dir or not Path(root_dir, "overlay2").is_dir():
        return f"the engine's data root {root_dir or '(unknown)'} is not visible from here"
    return None


def image_path(folder: Path, container_id: str) -> Path:
    return folder / f"{container_id}.ext4"


@dataclass
class LoopDisk:
    """One sandbox's writable layer on a filesystem of `size` bytes."""

    container_id: str
    limit: str  # as asked, for messages ("1G")
    size: int
    image: Path
    mountpoint: Path  # the layer's folder, under the engine's data root
    reached: str | None = None  # why the sandbox was stopped, once it was
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def full(self) -> bool:
        try:
            stat = os.statvfs(self.mountpoint)
        except OSError:  # unmounted or removed: nothing left to fill
            return False
        if not os.path.ismount(self.mountpoint):
            return False
        return stat.f_bavail * stat.f_frsize < FULL_FREE_BYTES or stat.f_favail == 0

    def trip(self) -> str:
        """Record that the limit was reached; the message a run fails with."""
        with self._lock:
            if self.reached is None:
                self.reached = (
                    f"the sandbox filled its disk limit of {self.limit} and was stopped: "
                    "make the work write less, or raise PIER_DISK_LIMIT"
                )
            return self.reached


def install(container_id: str, upper_dir: str, limit: str, size: int, folder: Path) -> LoopDisk:
    """Put a created (not started) container's writable layer on its own
    filesystem of `size` bytes. Raises SandboxError; leaves nothing then."""
    layer = Path(upper_dir).parent  # holds diff/ (the upper dir), work/, link, lower
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    image = image_path(folder, container_id)
    try:
        with open(image, "wb") as handle:
            handle.truncate(size)  # sparse: the host gives blocks only as they are written
        # -d copies the layer's folder (its link/lower files, empty diff/ and work/) in.
        _run(["mkfs.ext4", *MKFS_OPTIONS, "-d", str(layer), str(image)])
        _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(layer)])
    except BaseException:
        image.unlink(missing_ok=True)
        raise
    return LoopDisk(container_id, limit, size, image, layer)


def release(folder: Path, container_id: str, mountpoint: Path | None = None) -> None:
    """Unmount (when the engine has not) and delete a sandbox's filesystem.
    Idempotent; logs, never raises."""
    if mountpoint is not None and os.path.ismount(mountpoint):
        with contextlib.suppress(SandboxError):
            _run(["umount", "-l", str(mountpoint)])
    try:
        image_path(folder, container_id).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not delete the disk of sandbox %s: %s", container_id[:12], exc)


def _run(argv: list[str]) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace").strip()
        raise SandboxError(f"disk limit: {' '.join(argv[:1])} failed: {detail}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"disk limit: {' '.join(argv[:1])} failed: {exc}") from exc


class DiskWatch:
    """One thread for every guarded sandbox of a backend: every POLL_S it looks
    at each filesystem and calls stop(container_id) for one that is full."""

    def __init__(self, stop: Callable[[str], None]):
        self._stop = stop
        self._disks: dict[str, LoopDisk] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, disk: LoopDisk) -> None:
        with self._lock:
            self._disks[disk.container_id] = disk
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="pier-disk-watch", daemon=True)
                self._thread.start()

    def get(self, container_id: str) -> LoopDisk | None:
        with self._lock:
            return self._disks.get(container_id)

    def discard(self, container_id: str) -> LoopDisk | None:
        with self._lock:
            return self._disks.pop(container_id, None)

    def check(self, disk: LoopDisk) -> str | None:
        """Stop disk's sandbox if its filesystem is full; why it was stopped, if it was."""
        if disk.reached is None and disk.full():
            message = disk.trip()
            log.info("sandbox %s: %s", disk.container_id[:12], message)
            self._stop(disk.container_id)
        return disk.reached

    def _watch(self) -> None:
        stop = threading.Event()
        while True:
            with self._lock:
                disks = list(self._disks.values())
                if not disks:
                    self._thread = None
                    return
            for disk in disks:
                try:
                    self.check(disk)
                except Exception as exc:  # one sandbox's trouble never stops the watch
                    log.warning("disk watch on %s: %s", disk.container_id[:12], exc)
            stop.wait(POLL_S)
