"""The disk guard's mount, made with the kernel's calls instead of `mount -o loop`:
the filesystem is mounted nosuid and nodev on a loop device bound to its file,
the device goes when the filesystem is unmounted, a failed mount leaves no
device behind, and a kernel without LOOP_CONFIGURE gets the `mount` tool."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from tests.support.services import executable, require_service

from pier.errors import SandboxError
from pier.sandbox.docker import diskguard


@pytest.fixture
def loop_host() -> None:
    """Root, loop devices and mkfs.ext4, as the disk guard needs (CI has them)."""
    executable("mkfs.ext4", "e2fsprogs", "apt-get install e2fsprogs")
    if os.geteuid() != 0 or not Path("/dev/loop-control").exists():
        require_service("loop devices", "the disk guard's mount needs root and /dev/loop-control")


def formatted(path: Path, size: int = 64 << 20) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
    subprocess.run(["mkfs.ext4", *diskguard.MKFS_OPTIONS, str(path)], check=True, capture_output=True)
    return path


def devices_of(image: Path) -> list[str]:
    """Loop devices whose backing file is `image`."""
    found = []
    for block in Path("/sys/block").glob("loop*"):
        backing = block / "loop" / "backing_file"
        if backing.exists() and backing.read_text().strip() == str(image):
            found.append(block.name)
    return found


def mount_options(target: Path) -> set[str]:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(target):
            return set(fields[5].split(","))
    return set()


def test_the_file_is_mounted_nosuid_nodev_and_its_device_goes_at_unmount(tmp_path, loop_host):
    image, target = formatted(tmp_path / "disk.ext4"), tmp_path / "layer"
    target.mkdir()
    diskguard.loop_mount(image, target)
    try:
        assert os.path.ismount(target)
        assert {"nosuid", "nodev", "rw"} <= mount_options(target)
        assert len(devices_of(image)) == 1
        (target / "written").write_bytes(b"x" * 4096)
        assert os.statvfs(target).f_blocks * os.statvfs(target).f_frsize <= 64 << 20
    finally:
        subprocess.run(["umount", str(target)], check=True)
    assert not os.path.ismount(target)
    assert devices_of(image) == []  # autoclear: nothing left attached


def test_a_file_that_is_no_filesystem_fails_and_leaves_no_device(tmp_path, loop_host):
    image, target = tmp_path / "zeros.img", tmp_path / "layer"
    with open(image, "wb") as handle:
        handle.truncate(8 << 20)
    target.mkdir()
    with pytest.raises(SandboxError, match="mount failed"):
        diskguard.loop_mount(image, target)
    assert not os.path.ismount(target)
    assert devices_of(image) == []


def test_two_mounts_at_once_each_get_their_own_device(tmp_path, loop_host):
    from concurrent.futures import ThreadPoolExecutor

    pairs = []
    for n in range(6):
        target = tmp_path / f"layer{n}"
        target.mkdir()
        pairs.append((formatted(tmp_path / f"disk{n}.ext4", 16 << 20), target))
    try:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda pair: diskguard.loop_mount(*pair), pairs))
        devices = [devices_of(image) for image, _target in pairs]
        assert all(len(found) == 1 for found in devices)
        assert len({found[0] for found in devices}) == 6
    finally:
        for _image, target in pairs:
            subprocess.run(["umount", str(target)], check=False)


def test_a_kernel_without_loop_configure_gets_the_mount_tool(tmp_path, monkeypatch, loop_host):
    real_ioctl = fcntl.ioctl

    def old_kernel(fd, request, *args):
        if request == diskguard.LOOP_CONFIGURE:
            raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")
        return real_ioctl(fd, request, *args)

    monkeypatch.setattr(diskguard.fcntl, "ioctl", old_kernel)
    image = mounted_by_the_tool(tmp_path, monkeypatch)
    assert devices_of(image) == []  # the device it tried was let go


def mounted_by_the_tool(tmp_path: Path, monkeypatch) -> Path:
    """loop_mount of a fresh image, asserting it asked the mount tool (recorded, not run)."""
    ran: list[list[str]] = []
    monkeypatch.setattr(diskguard, "_run", ran.append)
    image, target = formatted(tmp_path / "disk.ext4"), tmp_path / "layer"
    diskguard.loop_mount(image, target)
    assert ran == [["mount", "-o", "loop,nosuid,nodev", str(image), str(target)]]
    return image


def test_the_writable_layer_is_read_from_the_engines_layer_database(tmp_path):
    root = tmp_path / "docker"
    entry = root / "image" / "overlay2" / "layerdb" / "mounts" / "c0ffee"
    entry.mkdir(parents=True)
    (entry / "mount-id").write_text("abc123")
    (root / "overlay2" / "abc123" / "diff").mkdir(parents=True)
    assert diskguard.upper_dir(str(root), "c0ffee") == str(root / "overlay2" / "abc123" / "diff")
    assert diskguard.upper_dir(str(root), "other") is None  # no entry: the caller inspects
    (entry / "mount-id").write_text("../../etc")
    assert diskguard.upper_dir(str(root), "c0ffee") is None
    (entry / "mount-id").write_text("gone")
    assert diskguard.upper_dir(str(root), "c0ffee") is None
    assert diskguard.upper_dir(None, "c0ffee") is None


def test_a_dev_without_the_devices_node_gets_the_mount_tool(tmp_path, monkeypatch, loop_host):
    """A static /dev (no node made for a new loop device): the tool is asked,
    which may find one of its own, and nothing is left attached."""
    real_open = os.open

    def static_dev(path, *args, **kwargs):
        if str(path).startswith("/dev/loop") and str(path) != "/dev/loop-control":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(diskguard.os, "open", static_dev)
    image = mounted_by_the_tool(tmp_path, monkeypatch)
    monkeypatch.undo()
    assert devices_of(image) == []
