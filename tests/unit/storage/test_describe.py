from __future__ import annotations

from pathlib import Path

import pytest

from pier.record import ResultFile
from pier.storage import content_type, describe


@pytest.mark.parametrize(
    ("name", "expected_type", "extension"),
    [
        ("report.md", "text/markdown", "md"),
        ("data.json", "application/json", "json"),
        ("table.CSV", "text/csv", "csv"),
        ("page.html", "text/html", "html"),
        ("image.png", "image/png", "png"),
        ("notes.txt", "text/plain", "txt"),
        ("archive.zip", "application/zip", "zip"),
        ("doc.pdf", "application/pdf", "pdf"),
        ("events.jsonl", "application/x-ndjson", "jsonl"),
        ("blob.weirdext", "application/octet-stream", "weirdext"),
        ("Makefile", "application/octet-stream", ""),
        ("dump.sql.gz", "application/gzip", "gz"),
        ("logs.gz", "application/gzip", "gz"),
        ("src.tar.xz", "application/x-xz", "xz"),
    ],
)
def test_describe(tmp_path: Path, name: str, expected_type: str, extension: str) -> None:
    path = tmp_path / "results" / name
    path.parent.mkdir()
    path.write_bytes(b"12345")
    assert describe(path, tmp_path) == ResultFile(
        path=f"results/{name}", content_type=expected_type, extension=extension, size=5
    )


def test_describe_nested_path_is_posix_and_relative(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c.tar.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    described = describe(path, tmp_path / "a")
    assert (described.path, described.extension, described.size) == ("b/c.tar.gz", "gz", 0)
    assert described.content_type == "application/gzip"


def test_describe_refuses_a_path_outside_base(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("x")
    with pytest.raises(ValueError):
        describe(path, tmp_path / "elsewhere")


def test_content_type_falls_back(tmp_path: Path) -> None:
    assert content_type(tmp_path / "x.unknownthing") == "application/octet-stream"
