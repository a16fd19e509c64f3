"""The disk guard's spares: filesystems formatted ahead of time, taken once each,
and a layer's folder put back on one as it was."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from pier.sandbox.docker import diskguard
from pier.sandbox.docker.diskguard import Spares, _entries, _put_back

needs_mkfs = pytest.mark.skipif(shutil.which("mkfs.ext4") is None, reason="needs mkfs.ext4")


def layer_like(folder: Path) -> Path:
    """What the engine leaves in a created container's layer folder."""
    folder.mkdir(mode=0o710)
    (folder / "diff").mkdir(mode=0o755)
    (folder / "work" / "work").mkdir(parents=True)
    os.chmod(folder / "work", 0o700)
    (folder / "link").write_text("2MCOMVVSK776NYB6ELOEGU6DN6")
    (folder / "lower").write_text("l/ABC:l/DEF")
    os.chmod(folder / "link", 0o644)
    os.utime(folder / "diff", ns=(1_000_000_000, 2_000_000_000))
    return folder


def tree(folder: Path) -> dict[str, tuple]:
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = Path(root, name)
            info = os.lstat(path)
            content = path.read_bytes() if path.is_file() else None
            found[str(path.relative_to(folder))] = (info.st_mode, info.st_uid, info.st_mtime_ns, content)
    info = os.stat(folder)
    found["."] = (info.st_mode, info.st_uid, info.st_mtime_ns, None)
    return found


def test_a_layer_folder_is_put_back_as_it_was(tmp_path):
    layer = layer_like(tmp_path / "layer")
    before = tree(layer)
    entries = _entries(layer)
    assert entries is not None
    shutil.rmtree(layer)
    layer.mkdir()  # as a fresh filesystem's root mounted over it
    _put_back(layer, entries)
    assert tree(layer) == before


def test_a_layer_holding_anything_else_is_formatted_with_its_files_instead(tmp_path):
    layer = layer_like(tmp_path / "layer")
    (layer / "diff" / "to-elsewhere").symlink_to("/etc")
    assert _entries(layer) is None
    layer = layer_like(tmp_path / "big")
    (layer / "lower").write_bytes(b"x" * (diskguard.MAX_ENTRY_BYTES + 1))
    assert _entries(layer) is None


@needs_mkfs
def test_each_spare_is_taken_once_even_by_racing_takers(tmp_path):
    spares = Spares(tmp_path, 3)
    spares.fill(64 << 20)
    assert len(list(spares.folder.glob("*.ext4"))) == 3
    won: list[Path] = []
    start = threading.Barrier(6)

    def take(n: int) -> None:
        start.wait()
        if spares.take(64 << 20, tmp_path / f"{n}.ext4"):
            won.append(tmp_path / f"{n}.ext4")

    threads = [threading.Thread(target=take, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 3 and all(path.stat().st_size == 64 << 20 for path in won)
    assert not spares.take(64 << 20, tmp_path / "more.ext4")
    assert not spares.take(32 << 20, tmp_path / "other-size.ext4"), "a spare of another size was taken"


@needs_mkfs
def test_spares_are_made_again_up_to_their_count_and_never_with_zero(tmp_path):
    spares = Spares(tmp_path, 2)
    spares.fill(64 << 20)
    assert spares.take(64 << 20, tmp_path / "a.ext4")
    spares.fill(64 << 20)
    assert len(list(spares.folder.glob("*.ext4"))) == 2
    none = Spares(tmp_path / "none", 0)
    none.refill(64 << 20)
    none.fill(64 << 20)
    assert list(none.folder.glob("*.ext4")) == [] and not none.take(64 << 20, tmp_path / "b.ext4")


@needs_mkfs
def test_a_half_made_spare_of_an_ended_process_is_removed(tmp_path):
    spares = Spares(tmp_path, 1)
    spares.folder.mkdir(parents=True)
    ended = spares.folder / ".999999999-abc.partial"
    ended.write_bytes(b"")
    ours = spares.folder / f".{os.getpid()}-def.partial"
    ours.write_bytes(b"")
    spares.fill(64 << 20)
    assert not ended.exists() and ours.exists()
    assert len(list(spares.folder.glob("*.ext4"))) == 1
