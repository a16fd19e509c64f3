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

Spares: formatting the file (mkfs, which syncs what it wrote) is the guard's
cost that grows with the machine's I/O load, so it is done ahead of time. A few
empty filesystems of each size already asked for wait under `<folder>/spares/`
(`Spares`); a sandbox takes one by renaming it to its own file (atomic: two
processes never take the same), mounts it over its layer's folder and puts the
folder's few entries (link, lower, the empty diff/ and work/) back in it, as
`mkfs -d` copies them. A spare was never mounted before and is deleted with
the sandbox that took it, so no sandbox sees another's files. With no spare
left the sandbox formats its own file as before, and the spares are made again
in a background thread.

The mount itself is three calls to the kernel made from here (a free loop
device, LOOP_CONFIGURE with the file, mount(2)), where `mount -o loop` cost a
process of util-linux per sandbox (about 10 ms more on an idle machine,
docs/speed.md); a kernel older than LOOP_CONFIGURE (5.8) gets the `mount` tool.
The loop device is made to detach itself when its filesystem is unmounted
(autoclear), as `mount -o loop` does.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import logging
import os
import shutil
import stat as stat_mode
import struct
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pier.errors import SandboxError
from pier.sandbox.owner import pid_exists

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


def upper_dir(root_dir: str | None, container_id: str) -> str | None:
    """A created container's writable layer (its overlay upper dir), read where
    the engine keeps it (overlay2: the layer's id in the container's layerdb
    entry), without an inspect; None when it is not there as expected."""
    if not root_dir:
        return None
    try:
        layer_id = Path(
            root_dir, "image", "overlay2", "layerdb", "mounts", container_id, "mount-id"
        ).read_text()
    except OSError:
        return None
    layer_id = layer_id.strip()
    if not layer_id or "/" in layer_id or layer_id.startswith("."):
        return None
    upper = Path(root_dir, "overlay2", layer_id, "diff")
    return str(upper) if upper.is_dir() else None


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


def install(
    container_id: str, upper_dir: str, limit: str, size: int, folder: Path, spares: Spares | None = None
) -> LoopDisk:
    """Put a created (not started) container's writable layer on its own
    filesystem of `size` bytes: a spare one when `spares` has one, else one
    formatted here. Raises SandboxError; leaves nothing then."""
    layer = Path(upper_dir).parent  # holds diff/ (the upper dir), work/, link, lower
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    image = image_path(folder, container_id)
    entries = _entries(layer) if spares is not None else None
    try:
        if entries is not None and spares is not None and spares.take(size, image):
            loop_mount(image, layer)
            try:
                _put_back(layer, entries)
            except BaseException:
                with contextlib.suppress(SandboxError):
                    _run(["umount", str(layer)])
                raise
        else:
            _format(image, size, layer)
            loop_mount(image, layer)
    except BaseException:
        image.unlink(missing_ok=True)
        raise
    finally:
        if spares is not None:
            spares.refill(size)
    return LoopDisk(container_id, limit, size, image, layer)


# <linux/loop.h> and <sys/mount.h>
LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A
LO_FLAGS_AUTOCLEAR = 4
LOOP_INFO64_SIZE = 232  # struct loop_info64
LOOP_INFO64_FLAGS_AT = 52  # its lo_flags
MS_NOSUID, MS_NODEV = 2, 4
FREE_LOOP_TRIES = 64  # another process may take the free device first (EBUSY): ask again


def loop_mount(image: Path, target: Path) -> None:
    """Mount the ext4 file `image` on `target` through a loop device, nosuid and
    nodev, as `mount -o loop,nosuid,nodev` does, without its process. Raises
    SandboxError; leaves no loop device attached then."""
    try:
        device = _attach_loop(image)
    except _NoLoopConfigure:
        _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(target)])
        return
    except OSError as exc:
        raise SandboxError(f"disk limit: no loop device for {image.name}: {exc}") from exc
    name, handle = device
    try:
        if _libc().mount(name.encode(), str(target).encode(), b"ext4", MS_NOSUID | MS_NODEV, None) != 0:
            code = ctypes.get_errno()
            raise SandboxError(f"disk limit: mount failed: {name} on {target}: {os.strerror(code)}")
    finally:
        os.close(handle)  # autoclear: unmounted, or never mounted, the device detaches


class _NoLoopConfigure(Exception):
    """This kernel has no LOOP_CONFIGURE (before 5.8), or this /dev no loop
    control or device node: the `mount` tool is asked instead."""


def _attach_loop(image: Path) -> tuple[str, int]:
    """A free loop device bound to `image`, set to detach when its last user
    goes: (its path, an open handle to it)."""
    info = bytearray(LOOP_INFO64_SIZE)
    struct.pack_into("I", info, LOOP_INFO64_FLAGS_AT, LO_FLAGS_AUTOCLEAR)
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        # struct loop_config: the backing fd, a block size (0: the default), the info, 8 reserved u64
        config = struct.pack("II", backing, 0) + bytes(info) + bytes(64)
        try:
            control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError as exc:  # the `mount` tool may still find a device
            raise _NoLoopConfigure() from exc
        try:
            for _ in range(FREE_LOOP_TRIES):
                name = f"/dev/loop{fcntl.ioctl(control, LOOP_CTL_GET_FREE)}"
                try:
                    handle = os.open(name, os.O_RDWR | os.O_CLOEXEC)
                except FileNotFoundError as exc:  # no device node made for it here (a static /dev)
                    raise _NoLoopConfigure() from exc
                try:
                    fcntl.ioctl(handle, LOOP_CONFIGURE, config)
                except OSError as exc:
                    os.close(handle)
                    if exc.errno == errno.EBUSY:
                        continue
                    if exc.errno in (errno.ENOTTY, errno.EINVAL):
                        raise _NoLoopConfigure() from exc
                    raise
                return name, handle
        finally:
            os.close(control)
    finally:
        os.close(backing)  # the device holds its own reference to the file
    raise OSError(errno.EBUSY, f"every free loop device was taken first ({FREE_LOOP_TRIES} tries)")


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _format(image: Path, size: int, source: Path | None = None) -> None:
    with open(image, "wb") as handle:
        handle.truncate(size)  # sparse: the host gives blocks only as they are written
    # -d copies the layer's folder (its link/lower files, empty diff/ and work/) in.
    _run(["mkfs.ext4", *MKFS_OPTIONS, *(("-d", str(source)) if source else ()), str(image)])


@dataclass(frozen=True)
class _Entry:
    path: str  # relative to the layer's folder; "" for the folder itself
    mode: int
    uid: int
    gid: int
    times: tuple[int, int]
    data: bytes | None  # a file's content; None for a folder
    xattrs: tuple[tuple[str, bytes], ...]


MAX_ENTRIES = 64
MAX_ENTRY_BYTES = 1 << 16


def _entries(layer: Path) -> list[_Entry] | None:
    """What a created container's layer folder holds (a few small files and
    empty folders), to put back on a spare; None for anything else (a link, a
    device, a large file): the sandbox then formats its own with `mkfs -d`."""
    found: list[_Entry] = []
    try:
        for root, dirs, files in os.walk(layer):
            for name in [".", *dirs, *files] if root == str(layer) else [*dirs, *files]:
                path = Path(root, name)
                info = os.lstat(path)
                if stat_mode.S_ISDIR(info.st_mode):
                    data = None
                elif stat_mode.S_ISREG(info.st_mode) and info.st_size <= MAX_ENTRY_BYTES:
                    data = path.read_bytes()
                else:
                    return None
                xattrs = tuple((key, os.getxattr(path, key, follow_symlinks=False))
                               for key in os.listxattr(path, follow_symlinks=False))  # fmt: skip
                relative = "" if name == "." else str(path.relative_to(layer))
                found.append(_Entry(relative, info.st_mode, info.st_uid, info.st_gid,
                                    (info.st_atime_ns, info.st_mtime_ns), data, xattrs))  # fmt: skip
                if len(found) > MAX_ENTRIES:
                    return None
    except OSError as exc:
        log.debug("the layer %s is not read for a spare disk: %s", layer, exc)
        return None
    return found


def _put_back(layer: Path, entries: list[_Entry]) -> None:
    """The layer folder's entries, as they were, on the filesystem now mounted
    over it (folders first: os.walk lists a folder before what it holds)."""
    try:
        for entry in entries:
            path = layer / entry.path if entry.path else layer
            if entry.data is None:
                if entry.path:
                    path.mkdir()
            else:
                with open(path, "xb") as handle:
                    handle.write(entry.data)
            os.chown(path, entry.uid, entry.gid)
            os.chmod(path, stat_mode.S_IMODE(entry.mode))
            for key, value in entry.xattrs:
                os.setxattr(path, key, value)
        for entry in reversed(entries):  # a folder's times once what it holds is written
            os.utime(layer / entry.path if entry.path else layer, ns=entry.times)
    except OSError as exc:
        raise SandboxError(f"disk limit: the layer's files could not be put on its disk: {exc}") from exc


class Spares:
    """Empty filesystems formatted ahead of time, `count` of each size asked
    for, under `<folder>/spares/`, shared by every process using `folder`."""

    def __init__(self, folder: Path, count: int):
        self.folder = folder / "spares"
        self.count = count
        self._lock = threading.Lock()
        self._filling: set[int] = set()

    def _ready(self, size: int) -> list[Path]:
        try:
            return sorted(self.folder.glob(f"{size}-*.ext4"))
        except OSError:
            return []

    def take(self, size: int, image: Path) -> bool:
        """Move a spare of `size` bytes to `image`; False when there is none."""
        if self.count <= 0:
            return False
        for spare in self._ready(size):
            try:
                os.rename(spare, image)  # another process may have taken it first
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.debug("could not take the spare disk %s: %s", spare.name, exc)
                return False
            return True
        return False

    def refill(self, size: int) -> None:
        """Make spares of `size` again, up to `count`, in a background thread."""
        with self._lock:
            if self.count <= 0 or size in self._filling:
                return
            self._filling.add(size)
        threading.Thread(target=self._fill, args=(size,), name="pier-disk-spares", daemon=True).start()

    def fill(self, size: int) -> None:
        """Make spares of `size` up to `count`, here (a test, a bench's set-up)."""
        with self._lock:
            self._filling.add(size)
        self._fill(size)

    def _fill(self, size: int) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._remove_abandoned()
            while len(self._ready(size)) < self.count:
                name = uuid.uuid4().hex
                partial = self.folder / f".{os.getpid()}-{name}.partial"
                try:
                    _format(partial, size)
                    os.rename(partial, self.folder / f"{size}-{name}.ext4")
                finally:
                    partial.unlink(missing_ok=True)
        except Exception as exc:  # the next sandbox formats its own
            log.warning("could not make spare sandbox disks: %s", exc)
        finally:
            with self._lock:
                self._filling.discard(size)

    def _remove_abandoned(self) -> None:
        """Half-made spares of processes that ended while formatting them."""
        for partial in self.folder.glob(".*.partial"):
            pid = partial.name[1:].split("-", 1)[0]
            if pid.isdigit() and not pid_exists(int(pid)):
                partial.unlink(missing_ok=True)


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
