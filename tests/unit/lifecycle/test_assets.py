import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from pier.errors import AssetError
from pier.lifecycle.assets import AssetLimits, assets_tar, check_assets
from pier.settings import Settings


def make_zip(path: Path, entries: dict[str, bytes], link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, "/etc/passwd")
    return path


@pytest.mark.parametrize(
    ("entries", "link", "reason"),
    [
        ({"../evil.txt": b"x"}, None, "outside /app/assets"),
        ({"a/../../evil.txt": b"x"}, None, "outside /app/assets"),
        ({"/etc/evil": b"x"}, None, "absolute"),
        ({"ok.txt": b"x"}, "link", "symbolic link"),
    ],
)
def test_unsafe_zip_is_rejected(tmp_path, entries, link, reason):
    archive = make_zip(tmp_path / "bad.zip", entries, link)
    with pytest.raises(AssetError, match=reason):
        check_assets([archive])


def test_missing_and_duplicate_names(tmp_path):
    with pytest.raises(AssetError, match="does not exist"):
        check_assets([tmp_path / "nope.csv"])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.csv").write_text("1")
    (tmp_path / "b" / "x.csv").write_text("2")
    a, b = tmp_path / "a" / "x.csv", tmp_path / "b" / "x.csv"
    with pytest.raises(
        AssetError, match=f"attached files clash: {a} and {b} would both be /app/assets/x.csv"
    ):
        check_assets([a, b])


def test_a_zip_entry_and_a_file_landing_on_the_same_path_are_refused_naming_both(tmp_path):
    archive = make_zip(tmp_path / "data.zip", {"notes.txt": b"from the zip", "other.txt": b"x"})
    (tmp_path / "b").mkdir()
    notes = tmp_path / "b" / "notes.txt"
    notes.write_text("from b/")
    both = f"data.zip (entry notes.txt) and {notes} would both be /app/assets/notes.txt"
    with pytest.raises(AssetError, match=re.escape(both)):
        check_assets([archive, notes])
    second = make_zip(tmp_path / "more.zip", {"./d/../other.txt": b"y"})
    with pytest.raises(
        AssetError, match=re.escape("data.zip (entry other.txt) and more.zip (entry ./d/../other.txt)")
    ):
        check_assets([archive, second])


def test_tar_extracts_zips_and_keeps_other_files(tmp_path):
    archive = make_zip(tmp_path / "data.zip", {"d/one.txt": b"1", "a/./../two.txt": b"2"})
    plain = tmp_path / "notes.md"
    plain.write_text("hello")
    paths = check_assets([archive, plain])
    out = assets_tar(paths, tmp_path / "out.tar")
    with tarfile.open(out) as tar:
        names = {m.name: m for m in tar.getmembers()}
        assert set(names) == {"d/one.txt", "two.txt", "notes.md"}
        assert tar.extractfile(names["two.txt"]).read() == b"2"


# --- limits: a zip bomb is refused before anything is expanded ----------------


def zeros_zip(path: Path, entries: dict[str, int]) -> Path:
    """A zip of files of zeros, written in chunks: a bomb without the memory."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, size in entries.items():
            with archive.open(name, "w", force_zip64=True) as out:
                for _ in range(size >> 20):
                    out.write(bytes(1 << 20))
                out.write(bytes(size & ((1 << 20) - 1)))
    return path


def test_a_zip_bomb_is_refused_by_its_ratio_naming_the_file(tmp_path):
    bomb = zeros_zip(tmp_path / "bomb.zip", {"zeros.bin": 64 << 20})
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(AssetError, match=r"bomb\.zip would expand \d+ times .*PIER_MAX_ZIP_RATIO"):
        check_assets([bomb])


@pytest.mark.parametrize(
    ("limits", "says"),
    [
        (AssetLimits(total_bytes=3 << 20), r"more than 3\.0 MiB.*PIER_MAX_ASSETS_BYTES"),
        (AssetLimits(file_bytes=1 << 20), r"entry 'b.bin' is 2\.0 MiB.*PIER_MAX_ASSET_FILE_BYTES"),
        (AssetLimits(files=2), r"more than 2 files.*PIER_MAX_ASSETS_FILES"),
    ],
)
def test_expanded_size_file_size_and_count_are_bounded(tmp_path, limits, says):
    archive = zeros_zip(tmp_path / "data.zip", {"a.bin": 1 << 10, "b.bin": 2 << 20})
    plain = tmp_path / "notes.bin"
    plain.write_bytes(bytes(2 << 20))
    roomy = AssetLimits(zip_ratio=1e9)
    assert check_assets([archive, plain], roomy)
    with pytest.raises(AssetError, match=says):
        check_assets([archive, plain], AssetLimits(**{**roomy.__dict__, **_changed(limits)}))


def _changed(limits: AssetLimits) -> dict:
    default = AssetLimits()
    return {k: v for k, v in limits.__dict__.items() if v != getattr(default, k)}


def test_a_plain_file_counts_against_the_limits_too(tmp_path):
    big = tmp_path / "big.csv"
    big.write_bytes(bytes(3 << 20))
    with pytest.raises(AssetError, match=r"big\.csv is 3\.0 MiB"):
        check_assets([big], AssetLimits(file_bytes=2 << 20))


def test_small_archives_of_repetitive_text_are_not_bombs(tmp_path):
    archive = zeros_zip(tmp_path / "small.zip", {"blank.txt": 512 << 10})  # ratio ~500, tiny
    assert check_assets([archive]) == (archive,)


def test_the_settings_carry_the_limits():
    limits = AssetLimits.of(
        Settings(max_assets_bytes=10, max_assets_files=2, max_asset_file_bytes=5, max_zip_ratio=3)
    )
    assert limits == AssetLimits(10, 2, 5, 3)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("..\\evil.txt", "would be written outside /app/assets (../)"),  # made on Windows
        ("a\\..\\..\\evil.txt", "would be written outside /app/assets (../)"),
        ("C:/evil.txt", "is an absolute path"),
        ("c:", "is an absolute path"),
        ("\\etc\\evil", "is an absolute path"),
    ],
)
def test_windows_style_entries_are_judged_like_posix_ones(tmp_path, entry, reason):
    archive = make_zip(tmp_path / "bad.zip", {entry: b"x"})
    with pytest.raises(AssetError) as err:
        check_assets([archive])
    assert (
        str(err.value)
        == f"bad.zip: entry '{entry}' {reason}; the archive was rejected and nothing was extracted"
    )


def test_one_letter_names_are_fine(tmp_path):
    archive = make_zip(tmp_path / "ok.zip", {"a": b"1", "b/c": b"2"})
    assert check_assets([archive]) == (archive,)


def test_tar_keeps_zip_folders_and_modes_and_turns_backslashes_into_folders(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(zipfile.ZipInfo("empty/"), b"")
        z.writestr("d/one.txt", b"1")
        z.writestr("win\\two.txt", b"2")
    out = assets_tar(check_assets([archive]), tmp_path / "out.tar")
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"empty", "d/one.txt", "win/two.txt"}
        assert members["empty"].isdir() and members["empty"].mode == 0o755
        assert members["d/one.txt"].isfile() and members["d/one.txt"].mode == 0o644
        assert tar.extractfile(members["win/two.txt"]).read() == b"2"


def test_a_symbolic_link_entry_is_refused_by_name(tmp_path):
    archive = make_zip(tmp_path / "links.zip", {"ok.txt": b"x"}, link="passwd")
    with pytest.raises(AssetError) as err:
        check_assets([archive])
    assert str(err.value) == (
        "links.zip: entry 'passwd' is a symbolic link; the archive was rejected and nothing was extracted"
    )
