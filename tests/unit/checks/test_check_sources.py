"""Fetching code check sources on the host, and the in-sandbox clone command."""

import io
import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest

from pier.checks.model import CodeCheck
from pier.checks.runner import BoundedOutput, root_owned_tar, summary_line
from pier.checks.sources import (
    FetchError,
    clones_in_sandbox,
    fetch_on_host,
    is_remote,
    sandbox_clone_command,
)
from pier.record import CheckResult


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "check.sh").write_text("echo v1\n")
    git("add", ".", cwd=path)
    git("commit", "-qm", "v1", cwd=path)
    git("tag", "v1", cwd=path)
    git("checkout", "-qb", "next", cwd=path)
    (path / "check.sh").write_text("echo next\n")
    git("commit", "-qam", "next", cwd=path)
    git("checkout", "-q", "main", cwd=path)
    (path / "check.sh").write_text("echo main\n")
    git("commit", "-qam", "main", cwd=path)
    (path / "check.sh").write_text("echo uncommitted\n")
    return path


def code(source, ref=None, name="unit") -> CodeCheck:
    return CodeCheck(name=name, type="code", source=str(source), ref=ref, run="true")


@pytest.mark.parametrize(("ref", "expected"), [(None, "main"), ("v1", "v1"), ("next", "next")])
def test_a_local_repository_is_cloned_at_its_ref(repo, tmp_path, ref, expected):
    out = tmp_path / "out"
    out.mkdir()
    tree = fetch_on_host(code(repo, ref), out, timeout=60)
    assert tree == out / "unit"
    # A clone: committed content only, never the work tree's edits.
    assert (tree / "check.sh").read_text() == f"echo {expected}\n"


def test_a_commit_id_works_as_ref(repo, tmp_path):
    sha = git("rev-parse", "v1", cwd=repo).strip()
    tree = fetch_on_host(code(repo, sha), tmp_path, timeout=60)
    assert (tree / "check.sh").read_text() == "echo v1\n"


def test_a_bare_repository_is_cloned(repo, tmp_path):
    bare = tmp_path / "bare.git"
    git("clone", "-q", "--bare", str(repo), str(bare), cwd=tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    assert (fetch_on_host(code(bare, "v1"), out, timeout=60) / "check.sh").read_text() == "echo v1\n"


def test_a_plain_folder_is_copied_under_the_check_name(tmp_path):
    source = tmp_path / "tests"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "t.py").write_text("x")
    out = tmp_path / "out"
    out.mkdir()
    tree = fetch_on_host(code(source, name="my-check"), out, timeout=60)
    assert (tree / "sub" / "t.py").read_text() == "x" and tree.name == "my-check"


def test_a_missing_ref_is_a_fetch_error(repo, tmp_path):
    with pytest.raises(FetchError, match="checkout of no-such-ref failed"):
        fetch_on_host(code(repo, "no-such-ref"), tmp_path, timeout=60)


def test_host_clones_refuse_other_transports(tmp_path):
    # ssh would use the host's keys: a host clone allows only file, http(s) and git.
    with pytest.raises(FetchError, match="transport 'ssh' not allowed"):
        fetch_on_host(code("ssh://git@127.0.0.1:1/org/checks.git"), tmp_path, timeout=60)


@pytest.mark.parametrize(
    ("source", "remote"),
    [
        ("https://github.com/org/checks.git", True),
        ("git@github.com:org/checks.git", True),
        ("ssh://git@host/org/checks", True),
        ("/srv/checks", False),
        ("tests", False),
        ("file:///srv/checks", False),
        ("ext::sh -c touch% /tmp/x", False),  # never reaches git: not a folder, refused at prepare
    ],
)
def test_remote_or_local(source, remote):
    assert is_remote(source) is remote
    assert clones_in_sandbox(code(source), network=True) is remote
    assert clones_in_sandbox(code(source), network=False) is False


def test_the_sandbox_clone_command_replaces_what_is_there_and_quotes():
    command = sandbox_clone_command(code("https://h/o/r.git", ref="v 1", name="unit"))
    assert command.startswith(
        "rm -rf -- /app/checks/unit && git clone --quiet -- https://h/o/r.git /app/checks/unit"
    )
    assert command.endswith(f"checkout --quiet {shlex.quote('v 1')} --")


def test_sources_are_root_owned_in_the_sandbox(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_text("x")
    with tarfile.open(fileobj=io.BytesIO(root_owned_tar(tmp_path / "src", "unit"))) as tar:
        members = tar.getmembers()
    assert {m.name for m in members} == {"unit", "unit/a"}
    assert all(m.uid == 0 and m.gid == 0 for m in members)


def test_output_is_bounded_and_says_so():
    bounded = BoundedOutput(limit=100)
    for _ in range(50):
        bounded.count("x" * 9)
    text = bounded.text("y" * 300)
    assert text.startswith("[output truncated: about 500 bytes in all; the last 100 are kept]\n")
    assert text.endswith("y" * 100) and len(text.split("\n", 1)[1]) == 100
    small = BoundedOutput(limit=100)
    small.count("hello")
    assert small.text("hello\n") == "hello\n"


def test_summary_line_shows_why_a_check_failed():
    failed = CheckResult(
        name="u",
        type="code",
        passed=False,
        exit_code=1,
        output="a\nAssertionError: 2 != 3\n",
        duration_s=1.25,
    )
    assert summary_line(failed) == "check u FAILED (1.2s, exit 1): AssertionError: 2 != 3"
    passed = CheckResult(name="u", type="code", passed=True, exit_code=0, output="ok", duration_s=0.5)
    assert summary_line(passed) == "check u passed (0.5s)"


class Counting:
    """A listener on 127.0.0.1 that counts the connections it is offered."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def count(self) -> int:
        seen = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                return seen
            conn.close()
            seen += 1


@pytest.mark.parametrize("scheme", ["http", "https", "git"])
def test_a_host_clone_from_loopback_is_refused_before_connecting(tmp_path, scheme):
    from pier.outbound import OutboundPolicy

    listener = Counting()
    source = f"{scheme}://127.0.0.1:{listener.port}/repo.git"
    with pytest.raises(FetchError, match=r"is not an allowed destination.*loopback"):
        fetch_on_host(code(source), tmp_path, timeout=30, policy=OutboundPolicy())
    assert listener.count() == 0


def test_a_host_clone_goes_to_the_address_checked_not_a_second_lookup(tmp_path):
    """A name that resolves to a public address when checked must not be looked
    up again by git (which would find loopback): git gets the checked address."""
    from pier.checks.sources import _pinned
    from pier.outbound import OutboundPolicy

    policy = OutboundPolicy(resolver=lambda host, port: ["93.184.215.14"])
    url, options = _pinned("https://rebind.example/repo.git", policy)
    assert url == "https://rebind.example/repo.git"
    assert options == ["-c", "http.curloptResolve=rebind.example:443:93.184.215.14",
                       "-c", "http.followRedirects=false"]  # fmt: skip
    url, options = _pinned("git://rebind.example/repo.git", policy)
    assert url == "git://93.184.215.14:9418/repo.git" and options == []


def test_an_opted_in_loopback_source_is_cloned(tmp_path, repo):
    """With PIER_OUTBOUND_ALLOW naming it, git fetches from loopback (a real git daemon)."""
    import shutil
    import subprocess
    import time

    from pier.outbound import allowing

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listener = Counting()
    port = listener.port
    listener.sock.close()
    base = repo.parent
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1)
        source = f"git://127.0.0.1:{port}/{repo.name}"
        out = tmp_path / "out"
        out.mkdir()
        tree = fetch_on_host(code(source), out, timeout=60, policy=allowing([f"127.0.0.1:{port}"]))
        assert (tree / ".git").exists()
    finally:
        daemon.terminate()
        daemon.wait(10)
