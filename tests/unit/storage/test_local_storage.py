from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from pier.errors import InputError, NotFoundError
from pier.storage import LocalStorage

BAD_NAMES = ["", ".", "..", "../x", "a/b", "a\\b", "/abs", ".hidden", "nul\x00l"]


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "storage")


def _write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_run_dir_is_created_under_collection_task_id(storage: LocalStorage) -> None:
    path = storage.run_dir("col", "task", "abc123")
    assert path == storage.root / "col" / "task" / "abc123"
    assert path.is_dir()
    assert storage.run_dir("col", "task", "abc123") == path  # again: no error


@pytest.mark.parametrize("bad", BAD_NAMES)
@pytest.mark.parametrize("which", [0, 1, 2])
def test_run_dir_refuses_unsafe_names(storage: LocalStorage, bad: str, which: int) -> None:
    names = ["col", "task", "id"]
    names[which] = bad
    kind = ("collection", "task", "trajectory")[which]
    with pytest.raises(InputError, match=f"^invalid {kind} name "):  # the message says which name
        storage.run_dir(*names)
    assert not (storage.root / "x").exists()


def test_names_with_dots_inside_are_fine(storage: LocalStorage) -> None:
    assert storage.run_dir("my.col", "task..v2", "id-1_x").is_dir()


def test_resolve_finds_files_inside_the_collection(storage: LocalStorage) -> None:
    run = storage.run_dir("col", "task", "r1")
    target = _write(run / "results" / "report.md")
    assert storage.resolve("col", "task/r1/results/report.md") == target.resolve()
    assert storage.resolve("col", "/task/r1/results/report.md") == target.resolve()
    assert storage.resolve("col", "task/r1/results/../results/report.md") == target.resolve()
    other = _write(storage.run_dir("col", "Xray", "r1") / "x.txt")  # only leading slashes go
    assert storage.resolve("col", "/Xray/r1/x.txt") == other.resolve()


@pytest.mark.parametrize(
    "relative",
    [
        "task/r1/missing.txt",
        "task/r1",  # a folder is not a file
        "../other/task/r1/secret.txt",
        "task/../../other/task/r1/secret.txt",
        "../../outside.txt",
        "/../outside.txt",
        "task/r1/\x00x",
        "",
    ],
)
def test_resolve_never_reaches_outside_or_missing(storage: LocalStorage, relative: str) -> None:
    storage.run_dir("col", "task", "r1")
    _write(storage.run_dir("other", "task", "r1") / "secret.txt")
    _write(storage.root.parent / "outside.txt")
    with pytest.raises(NotFoundError, match="not found in collection 'col'"):
        storage.resolve("col", relative)


def test_resolve_refuses_symlinks_that_leave_the_collection(storage: LocalStorage) -> None:
    run = storage.run_dir("col", "task", "r1")
    outside = _write(storage.root.parent / "outside.txt", "secret")
    other = _write(storage.run_dir("other", "task", "r1") / "secret.txt")
    (run / "link-file").symlink_to(outside)
    (run / "link-other").symlink_to(other)
    (run / "link-dir").symlink_to(storage.root.parent, target_is_directory=True)
    for relative in ("task/r1/link-file", "task/r1/link-other", "task/r1/link-dir/outside.txt"):
        with pytest.raises(NotFoundError):
            storage.resolve("col", relative)


def test_resolve_follows_symlinks_that_stay_inside(storage: LocalStorage) -> None:
    run = storage.run_dir("col", "task", "r1")
    real = _write(run / "real.txt")
    (run / "alias.txt").symlink_to(real)
    assert storage.resolve("col", "task/r1/alias.txt") == real.resolve()


def test_resolve_refuses_an_unsafe_collection(storage: LocalStorage) -> None:
    with pytest.raises(InputError):
        storage.resolve("..", "storage/col/x")


def test_zip_run_holds_the_run_folder(storage: LocalStorage, tmp_path: Path) -> None:
    run = storage.run_dir("col", "task", "r1")
    _write(run / "results" / "a.md", "alpha")
    _write(run / "results" / "sub" / "b.json", "{}")
    _write(run / "logs" / "agent" / "out.log", "log")
    (run / "empty").mkdir()
    outside = _write(tmp_path / "secret.txt", "secret")
    (run / "results" / "leak.txt").symlink_to(outside)
    (run / "results" / "leakdir").symlink_to(tmp_path, target_is_directory=True)

    with zipfile.ZipFile(io.BytesIO(storage.zip_run("col", "task", "r1"))) as archive:
        names = archive.namelist()
        assert sorted(names) == ["logs/agent/out.log", "results/a.md", "results/sub/b.json"]
        assert archive.read("results/a.md") == b"alpha"
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_DEFLATED}


def test_write_run_zip_to_a_file(storage: LocalStorage, tmp_path: Path) -> None:
    _write(storage.run_dir("col", "task", "r1") / "results" / "a.txt", "a")
    dest = tmp_path / "out.zip"
    with dest.open("wb") as out:
        storage.write_run_zip("col", "task", "r1", out)
    with zipfile.ZipFile(dest) as archive:
        assert archive.namelist() == ["results/a.txt"]


def test_zip_of_an_unknown_run_is_not_found(storage: LocalStorage) -> None:
    with pytest.raises(NotFoundError, match="'nope'"):
        storage.zip_run("col", "task", "nope")
    with pytest.raises(InputError):
        storage.zip_run("col", "..", "nope")


def test_upload_dirs_are_new_and_findable(storage: LocalStorage) -> None:
    first = storage.upload_dir("col")
    second = storage.upload_dir("col")
    assert first.upload_id != second.upload_id
    assert first.path.is_dir() and not any(first.path.iterdir())
    assert first.path.is_relative_to(storage.root / "col")
    assert storage.upload_path("col", first.upload_id) == first.path
    upload_id, path = second  # unpacks like a tuple
    assert path.name == upload_id
    staged = _write(path / "data.csv")
    relative = staged.relative_to(storage.root / "col").as_posix()
    assert storage.resolve("col", relative) == staged.resolve()


@pytest.mark.parametrize("bad", ["0" * 32, "../../etc", "abc", ""])
def test_unknown_upload_is_not_found(storage: LocalStorage, bad: str) -> None:
    storage.upload_dir("col")
    with pytest.raises(NotFoundError, match="upload"):
        storage.upload_path("col", bad)


def test_uploads_cannot_collide_with_a_task_name(storage: LocalStorage) -> None:
    upload = storage.upload_dir("col")
    with pytest.raises(InputError):
        storage.run_dir("col", upload.path.parent.name, "r1")


def test_relative_root_is_made_absolute(tmp_path: Path) -> None:
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        storage = LocalStorage(Path("rel"))
    finally:
        os.chdir(cwd)
    assert storage.root == tmp_path / "rel"
