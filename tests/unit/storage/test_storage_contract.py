"""The storage port's contract: one set of tests that every implementation
passes, the local folder and S3 (on a real S3-compatible server, see
tests/support/s3.py)."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.s3 import s3_scratch_url

from pier.errors import InputError, NotFoundError
from pier.storage import LocalStorage, RunStorage, open_storage
from pier.storage.archive import zip_stream
from pier.storage.migrate import migrate

RUN = "team-a/report/0123abcd"
UPLOAD = "team-a/.uploads/" + "a" * 32


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStorage]:
    if request.param == "local":
        yield LocalStorage(tmp_path / "storage")
        return
    url = s3_scratch_url()
    made = open_storage(url)
    yield made
    made.delete("team-a")
    made.delete("team-b")


def outputs(tmp_path: Path) -> Path:
    folder = tmp_path / "scratch" / "run"
    files = {
        "results/report.md": b"# report\n",
        "results/data/big.bin": os.urandom(9 << 20),  # past one multipart part
        "logs/agent.log": b"line\n",
        "run.json": b"{}",
    }
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "results" / "link").symlink_to("/etc/passwd")
    return folder


def test_published_files_are_listed_read_and_described_by_key(storage: RunStorage, tmp_path: Path) -> None:
    folder = outputs(tmp_path)
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    expected.pop("results/link")
    storage.publish(folder, RUN)
    listed = {f.key: f.size for f in storage.files(RUN)}
    assert listed == {f"{RUN}/{name}": len(data) for name, data in expected.items()}
    assert list(listed) == sorted(listed)
    for name, data in expected.items():
        key = f"{RUN}/{name}"
        assert storage.stat(key).size == len(data)
        with storage.open(key) as stream:
            assert stream.read() == data
        assert storage.fetch(key, tmp_path / "copy" / name).read_bytes() == data


def test_publish_adds_to_what_is_there_and_put_bytes_replaces(storage: RunStorage, tmp_path: Path) -> None:
    first = tmp_path / "one"
    (first / "results").mkdir(parents=True)
    (first / "results" / "a.txt").write_bytes(b"a")
    storage.publish(first, RUN)
    later = tmp_path / "two"
    later.mkdir()
    (later / "run.json").write_bytes(b'{"v": 1}')
    storage.publish(later, RUN)
    storage.put_bytes(f"{RUN}/run.json", b'{"v": 2}', "application/json")
    assert [f.key for f in storage.files(RUN)] == [f"{RUN}/results/a.txt", f"{RUN}/run.json"]
    with storage.open(f"{RUN}/run.json") as stream:
        assert stream.read() == b'{"v": 2}'


@pytest.mark.parametrize(
    "key",
    ["team-a/report/0123abcd/missing", "team-a/report", "", "../etc/passwd", "team-a/../team-b/x", "a\x00"],
)
def test_missing_and_unusable_keys_are_not_found(storage: RunStorage, key: str, tmp_path: Path) -> None:
    storage.put_bytes("team-b/x", b"other")
    storage.put_bytes(f"{RUN}/run.json", b"{}")
    with pytest.raises(NotFoundError):
        storage.stat(key)
    with pytest.raises(NotFoundError):
        storage.open(key)
    assert not storage.exists(key)


def test_unusable_keys_are_refused_for_writing(storage: RunStorage) -> None:
    for key in ("../x", "a//b", "a/./b", "/"):
        with pytest.raises(InputError, match="invalid storage key"):
            storage.put_bytes(key, b"x")


def test_delete_removes_a_prefix_and_only_it(storage: RunStorage) -> None:
    storage.put_bytes(f"{RUN}/results/a.txt", b"a")
    storage.put_bytes(f"{RUN}x/results/b.txt", b"b")  # shares the string prefix, not the folder
    storage.delete(RUN)
    storage.delete("team-a/nothing-here")
    assert list(storage.files(RUN)) == []
    assert [f.key for f in storage.files(f"{RUN}x")] == [f"{RUN}x/results/b.txt"]


def test_uploads_are_listed_with_their_age_and_a_touch_renews_it(storage: RunStorage, tmp_path: Path) -> None:
    storage.put_bytes(f"{UPLOAD}/data.csv", b"a,b\n")
    storage.put_bytes(f"{RUN}/results/a.txt", b"a")
    (found,) = list(storage.uploads())
    assert (found.collection, found.upload_id) == ("team-a", "a" * 32)
    assert [f.key for f in storage.files(UPLOAD)] == [f"{UPLOAD}/data.csv"]  # the marker is no file
    storage.touch_upload("team-a", "a" * 32)
    (touched,) = list(storage.uploads())
    assert touched.changed >= found.changed
    storage.delete(UPLOAD)
    assert list(storage.uploads()) == []


def test_the_zip_stream_holds_every_file_under_the_prefix(storage: RunStorage, tmp_path: Path) -> None:
    folder = outputs(tmp_path)
    storage.publish(folder, RUN)
    chunks = list(zip_stream(storage, RUN))
    assert len(chunks) > 2  # sent as it is made, not as one piece
    with zipfile.ZipFile(io.BytesIO(b"".join(chunks))) as archive:
        assert archive.testzip() is None
        assert sorted(archive.namelist()) == [
            "logs/agent.log",
            "results/data/big.bin",
            "results/report.md",
            "run.json",
        ]
        assert archive.read("results/report.md") == b"# report\n"
    with pytest.raises(NotFoundError):
        zip_stream(storage, "team-a/report/none")


def test_put_stream_stores_any_size_and_files_of_nothing_lists_all(
    storage: RunStorage, tmp_path: Path
) -> None:
    data = os.urandom(9 << 20)
    storage.put_stream(f"{RUN}/results/big.bin", io.BytesIO(data))
    storage.put_bytes(f"{UPLOAD}/in.csv", b"a")
    storage.put_bytes("team-b/t/r/run.json", b"{}")
    with storage.open(f"{RUN}/results/big.bin") as stream:
        assert stream.read() == data
    assert [f.key for f in storage.files("")] == [
        f"{UPLOAD}/in.csv",
        f"{RUN}/results/big.bin",
        "team-b/t/r/run.json",
    ]


def test_migrate_copies_every_file_once_and_leaves_the_source(storage: RunStorage, tmp_path: Path) -> None:
    source = LocalStorage(tmp_path / "old")
    source.publish(outputs(tmp_path), RUN)
    source.put_bytes(f"{UPLOAD}/in.csv", b"a,b\n")
    before = list(source.files(""))
    done = migrate(source, storage)
    assert (done.copied, done.skipped) == (len(before), 0)
    assert [(f.key, f.size) for f in storage.files("")] == [(f.key, f.size) for f in before]
    with storage.open(f"{UPLOAD}/in.csv") as stream:
        assert stream.read() == b"a,b\n"
    assert list(source.files("")) == before
    again = migrate(source, storage)  # an interrupted run is finished by running it again
    assert (again.copied, again.skipped) == (0, len(before))


def test_a_presigned_url_serves_the_file_as_pier_would(storage: RunStorage) -> None:
    storage.put_bytes(f"{RUN}/results/report.md", b"# report\n")
    url = storage.presigned_url(f"{RUN}/results/report.md", 60)
    if isinstance(storage, LocalStorage):
        assert url is None  # the API serves local files itself
        return
    assert url is not None
    got = httpx.get(url)
    assert got.status_code == 200 and got.content == b"# report\n"
    assert got.headers["content-type"].startswith("text/markdown")
    assert got.headers["content-disposition"] == 'attachment; filename="report.md"'
    with pytest.raises(NotFoundError):
        storage.presigned_url(f"{RUN}/results/missing.md", 60)
