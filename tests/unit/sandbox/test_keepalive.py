"""The sandbox's keep-alive script, run by a real sh on this machine: it takes
one tar on its stdin, says how that went in one status block, never leaves its
sender blocked, and ends in `sleep` (replaced here by one that returns)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from pier.sandbox.docker.keepalive import KEEPALIVE, KEEPALIVE_SCRIPT, NO_TAR, ChannelClosed, parse_status


def a_tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A PATH folder whose `sleep` returns at once (the real one would sleep for
    ever, holding stdin open): it says whether anything was left unread on stdin."""
    folder = tmp_path / "bin"
    folder.mkdir()
    sleep = folder / "sleep"
    sleep.write_text('#!/bin/sh\nif read -r _; then echo stdin-left; fi\necho slept "$@"\n')
    sleep.chmod(0o755)
    return folder


def keepalive(dest: Path, stdin: bytes, path: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["/bin/sh", "-c", KEEPALIVE_SCRIPT, "pier-keepalive", str(dest)],
        input=stdin, capture_output=True, env={"PATH": path}, timeout=60,
    )  # fmt: skip


def test_the_archive_is_extracted_then_one_status_block_then_sleep(tmp_path: Path, tools: Path):
    dest = tmp_path / "root"
    dest.mkdir()
    done = keepalive(
        dest, a_tar({"app/assets/notes.txt": b"notes\n", "etc/ca.pem": b"CA"}), f"{tools}:/usr/bin:/bin"
    )
    assert (dest / "app/assets/notes.txt").read_bytes() == b"notes\n" and (
        dest / "etc/ca.pem"
    ).read_bytes() == b"CA"
    status, messages = parse_status(done.stdout)
    assert (status, messages) == ("0", "")
    assert done.stdout.endswith(b"pier-setup-end\nslept infinity\n"), (
        done.stdout
    )  # then the keep-alive sleeps


def test_a_failing_tar_says_why_and_drains_what_it_left_unread(tmp_path: Path, tools: Path):
    """8 MB after a bad header: what tar left unread is drained (in a sandbox the
    sleeping keep-alive holds stdin open, and the sender would block for ever)."""
    dest = tmp_path / "root"
    dest.mkdir()
    done = keepalive(dest, b"not a tar\n" + b"x\n" * (4 << 20), f"{tools}:/usr/bin:/bin")
    status, messages = parse_status(done.stdout)
    assert status not in ("0", NO_TAR) and "tar" in messages
    assert done.stdout.endswith(b"pier-setup-end\nslept infinity\n"), done.stdout[-200:]


def test_what_tar_leaves_after_the_archives_end_is_drained(tmp_path: Path, tools: Path):
    """tar stops reading at its archive's end: the bytes after it (a sender's
    padding) are read by the keep-alive, never left to block the sender."""
    done = keepalive(tmp_path, a_tar({"a.txt": b"a"}) + b"z\n" * (1 << 20), f"{tools}:/usr/bin:/bin")
    assert parse_status(done.stdout)[0] == "0" and (tmp_path / "a.txt").read_bytes() == b"a"
    assert b"stdin-left" not in done.stdout


def test_an_image_without_tar_drains_the_archive_and_says_so(tmp_path: Path, tools: Path):
    os.symlink("/bin/cat" if Path("/bin/cat").exists() else "/usr/bin/cat", tools / "cat")
    done = keepalive(tmp_path, a_tar({"a": b"x\n" * (1 << 20)}) * 4, str(tools))
    assert parse_status(done.stdout) == (NO_TAR, "")
    assert b"stdin-left" not in done.stdout
    assert not (tmp_path / "a").exists()


def test_without_cat_either_the_shell_drains_it(tmp_path: Path, tools: Path):
    done = keepalive(tmp_path, b"y\n" * (1 << 18), str(tools))  # neither tar nor cat on PATH
    assert parse_status(done.stdout) == (NO_TAR, "")
    assert b"stdin-left" not in done.stdout


def test_a_stream_without_the_status_block_is_a_closed_channel():
    with pytest.raises(ChannelClosed):
        parse_status(b"")
    with pytest.raises(ChannelClosed):
        parse_status(b"\npier-setup 0\n")  # cut before its end
    assert parse_status(b"noise\npier-setup 2\ntar: oops\npier-setup-end\n") == ("2", "tar: oops")


def test_the_keepalive_extracts_at_the_sandboxs_root():
    assert KEEPALIVE[:2] == ["sh", "-c"] and KEEPALIVE[2] == KEEPALIVE_SCRIPT and KEEPALIVE[-1] == "/"
