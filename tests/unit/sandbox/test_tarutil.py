"""Tar streams out of a sandbox are extracted as they arrive, never held whole."""

import io
import os
import tarfile
import tracemalloc
from collections.abc import Iterator

import pytest

from pier.sandbox.tarutil import Budget, ChunkReader, OverBudget, extract_stream, file_chunks

MIB = 1 << 20


class _Sink:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)


def tar_stream(files: dict[str, int]) -> Iterator[bytes]:
    """A tar of `results/<name>` files of random bytes, yielded as it is made
    (the generator holds about one file at a time), as the engine streams it."""
    sink = _Sink()
    tar = tarfile.open(fileobj=sink, mode="w|")  # noqa: SIM115 - closed below, between yields
    for name, size in files.items():
        info = tarfile.TarInfo(f"results/{name}")
        info.size = size
        tar.addfile(info, io.BytesIO(os.urandom(size)))
        yield from sink.parts
        sink.parts.clear()
    tar.close()
    yield from sink.parts


def test_extracting_a_stream_keeps_memory_bounded(tmp_path):
    # 24 files of 4 MiB: 96 MiB through, while at most one 4 MiB file is being made.
    files = {f"part{i:02}.bin": 4 * MIB for i in range(24)}
    tracemalloc.start()
    written = extract_stream(tar_stream(files), tmp_path / "out")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sorted(p.name for p in written) == sorted(files)
    assert all(p.stat().st_size == 4 * MIB for p in written)
    # Whole-stream buffering (b"".join) would peak near 96 MiB.
    assert peak < 24 * MIB, f"peak {peak / MIB:.1f} MiB of Python memory while extracting 96 MiB"


def test_chunk_reader_reads_across_chunk_edges():
    reader = ChunkReader([b"ab", b"", b"cde", b"f", b"gh"])
    assert reader.read(3) == b"abc" and reader.read(1) == b"d" and reader.read(2) == b"ef"
    assert reader.read() == b"gh" and reader.read(5) == b""


def test_file_chunks_yield_the_whole_file_in_pieces():
    assert list(file_chunks(io.BytesIO(b"x" * 10), size=4)) == [b"xxxx", b"xxxx", b"xx"]


def test_a_budget_stops_extraction_before_the_file_that_would_pass_it(tmp_path):
    budget = Budget(max_bytes=5 * MIB, max_files=100)
    files = {"a.bin": 2 * MIB, "b.bin": 2 * MIB, "c.bin": 2 * MIB}
    with pytest.raises(OverBudget, match=r"more than 5242880 bytes \(c\.bin alone is 2097152\)") as caught:
        extract_stream(tar_stream(files), tmp_path / "out", budget=budget)
    assert [p.name for p in caught.value.written] == ["a.bin", "b.bin"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.bin", "b.bin"]  # c.bin never written


def test_a_budget_is_shared_and_counts_files(tmp_path):
    budget = Budget(max_bytes=100 * MIB, max_files=3)
    extract_stream(tar_stream({"a": 10, "b": 10}), tmp_path / "one", budget=budget)
    with pytest.raises(OverBudget, match="more than 3 files"):
        extract_stream(tar_stream({"c": 10, "d": 10}), tmp_path / "two", budget=budget)


def test_a_real_hard_link_is_written_as_a_file_of_its_own(tmp_path):
    """Made by tarfile from a folder with a second name of one file, as the
    engine archives one: the second name is a LNKTYPE member."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "a.txt").write_text("both")
    os.link(folder / "a.txt", folder / "b.txt")
    os.mkfifo(folder / "pipe")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname="results")
    written = extract_stream([buffer.getvalue()], tmp_path / "out")
    assert sorted(p.name for p in written) == ["a.txt", "b.txt"]
    assert (tmp_path / "out" / "b.txt").read_text() == "both"
    assert not (tmp_path / "out" / "pipe").exists()
