"""The run's zip is made while it is sent: bytes go out before the files are
read whole, in pieces of about one read, so memory does not grow with the run."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

from pier.storage import LocalStorage
from pier.storage.archive import CHUNK, zip_stream

SIZE = 24 << 20


class Counting(LocalStorage):
    """A local store that counts the bytes read from it."""

    read = 0

    def open(self, key: str) -> BinaryIO:
        stream = super().open(key)
        original = stream.read

        def counted(n: int = -1) -> bytes:
            data = original(n)
            Counting.read += len(data)
            return data

        stream.read = counted  # type: ignore[method-assign]
        return stream


def test_the_zip_streams_in_bounded_pieces_before_the_file_is_read(tmp_path: Path) -> None:
    storage = Counting(tmp_path / "storage")
    data = os.urandom(SIZE)  # incompressible: the zip is as big as the file
    storage.put_bytes("c/t/r/results/big.bin", data)
    storage.put_bytes("c/t/r/run.json", b"{}")
    Counting.read = 0
    chunks = zip_stream(storage, "c/t/r")
    first = next(chunks)
    assert Counting.read < SIZE // 4, "the first bytes left only after most of the file was read"
    rest = list(chunks)
    assert max(len(c) for c in [first, *rest]) <= 2 * CHUNK
    with zipfile.ZipFile(io.BytesIO(first + b"".join(rest))) as archive:
        assert archive.read("results/big.bin") == data and archive.namelist() == [
            "results/big.bin",
            "run.json",
        ]
