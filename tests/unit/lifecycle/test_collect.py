"""The collect stage against a stand-in sandbox that serves folders as tar
streams, as an engine does (one archive per folder) and as collect's script in
the sandbox does (its look, then one `tar -c` of all three on the same stdout):
what lands where, what is redacted, which results come first, and the contract
that a run must leave results. Every test runs both ways (the `way` fixture):
what collect keeps must not depend on it."""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import pytest

from pier.errors import SandboxError, StageError
from pier.lifecycle.collect import COLLECT, Survey, collect_outputs, parse_survey
from pier.lifecycle.context import RunContext
from pier.record import Trajectory
from pier.redact import Redactor
from pier.sandbox.base import ExecResult, StdoutStream
from pier.settings import Settings

SECRET = "sk-live-0123456789"


@dataclass(frozen=True)
class Special:
    """A tar member that is not a plain file (linkname: TOP stands for the folder)."""

    type: bytes
    linkname: str = ""


class FolderSandbox:
    """Serves `folders` ({sandbox folder: {relative name: bytes}}) through get_archive,
    with the Docker engine's rule: a container stays locked while an archive of it
    is being read, so a second get_archive before the first stream is read to its
    end (or closed) waits for ever. Here it fails at once instead of hanging.
    exec_stdout serves collect's script: its look (tar there with `has_tar`;
    every folder a folder), its marker line, then with `has_tar`
    `tar -c -f - --sort=name -C / <folders>` as GNU tar writes it (exiting
    `tar_exit`), in small chunks. Both give a folder's files in name order."""

    has_tar = False  # set for every test by the `way` fixture
    tar_exit = 0
    exec_refused = False  # the sandbox stops after the look: reading on raises SandboxError
    chunk = 97  # bytes per chunk of the script's stdout: the marker line comes in pieces

    def __init__(self, folders: dict[str, dict[str, bytes | Special]], sockets: tuple[str, ...] = ()):
        self.folders = folders
        self.sockets = sockets  # what `find -type s` finds: the engine leaves them out of archives
        self.open: str | None = None
        self.reads: list[str] = []  # get_archive's paths, and "look" for each exec_stdout
        self.stopped_early = False  # the script's stream was closed before it was read to its end

    def exec_stdout(
        self, argv: list[str], *, workdir: str = "/", timeout: float | None = None
    ) -> StdoutStream:
        assert argv[:3] == ["bash", "-c", COLLECT] and argv[3].startswith("pier-collect-"), argv
        self.reads.append("look")
        size = sum(
            len(data) for files in self.folders.values() for data in files.values() if isinstance(data, bytes)
        )
        found = ["tar"] if self.has_tar else []
        found += [f"dir {path}" for path in self.folders]
        found += [f"bytes {size}", *(f"s {path}" for path in self.sockets), argv[3]]
        head = "".join(f"{line}\n" for line in found).encode()
        tops = {
            path: path.lstrip("/")
            for path in ("/logs/agent", "/app/results", "/app/assets")
            if path in self.folders
        }
        tar = self._tar(tops) + b"\0" * 10240 if self.has_tar and tops else b""  # GNU tar pads
        result = ExecResult(self.tar_exit, "tar: something failed\n" if self.tar_exit and tar else "", 0.0)
        state = {"ended": False}

        def chunks() -> Iterator[bytes]:
            yield from (head[at : at + self.chunk] for at in range(0, len(head), self.chunk))
            if self.exec_refused and tar:
                raise SandboxError("the sandbox filled its disk limit of 1G and was stopped")
            yield from (tar[at : at + self.chunk] for at in range(0, len(tar), self.chunk))
            state["ended"] = True

        def close() -> None:
            self.stopped_early = self.stopped_early or not state["ended"]

        return StdoutStream(chunks(), lambda: result, close)

    def get_archive(self, path: str) -> Iterator[bytes]:
        assert self.open is None, (
            f"get_archive({path}) while {self.open} is still being read: deadlocks on Docker"
        )
        self.reads.append(path)
        if path not in self.folders:
            raise FileNotFoundError(path)
        self.open = path
        return self._stream(self._tar({path: PurePosixPath(path).name}))

    def _tar(self, tops: dict[str, str]) -> bytes:
        """A tar of folders ({sandbox folder: its name in the tar}), each
        folder's files in name order."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path, top in tops.items():
                tar.addfile(_folder(top))
                for name, data in sorted(self.folders[path].items()):
                    info = tarfile.TarInfo(f"{top}/{name}")
                    if isinstance(data, Special):
                        info.type, info.linkname = data.type, data.linkname.replace("TOP", top)
                        tar.addfile(info)
                        continue
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    def _stream(self, data: bytes) -> Iterator[bytes]:
        try:
            yield data
        finally:
            self.open = None


@pytest.fixture(autouse=True, params=["tar", "archives"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the folders come out: one tar exec, or the engine's archive per folder."""
    monkeypatch.setattr(FolderSandbox, "has_tar", request.param == "tar")
    return request.param


def _folder(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


def context(
    tmp_path: Path, sandbox: FolderSandbox, *, secrets=(), primary=()
) -> tuple[RunContext, list[str]]:
    lines: list[str] = []
    ctx = RunContext(
        task=None,  # type: ignore[arg-type]
        run_params={},
        inputs=None,  # type: ignore[arg-type]
        record=Trajectory.new("r" * 32, "local", "task"),
        settings=Settings(home=tmp_path / "home"),
        backend=None,  # type: ignore[arg-type]
        output_dir=tmp_path / "out",
        emit=lambda _stage, line: lines.append(line),
        save_record=lambda _record: None,
        redactor=Redactor(secrets),
        plan=SimpleNamespace(primary_outputs=tuple(primary)),  # type: ignore[arg-type]
        sandbox=sandbox,  # type: ignore[arg-type]
    )
    return ctx, lines


def test_logs_results_and_assets_land_in_their_folders(tmp_path: Path):
    sandbox = FolderSandbox({
        "/logs/agent": {"agent.log": b"hello\n", "deep/trace.jsonl": b"{}\n"},
        "/app/results": {"report.md": b"# r\n", "data/x.csv": b"a,b\n"},
        "/app/assets": {"input.txt": b"in"},
    })  # fmt: skip
    ctx, lines = context(tmp_path, sandbox)
    collect_outputs(ctx)
    out = tmp_path / "out"
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["assets/input.txt", "logs/agent.log", "logs/deep/trace.jsonl", "results/data/x.csv",
                     "results/report.md"]  # fmt: skip
    assert (out / "logs" / "deep" / "trace.jsonl").read_bytes() == b"{}\n"
    assert lines == ["collected 2 result file(s)"]


def test_every_stored_log_file_is_redacted_byte_for_byte(tmp_path: Path):
    sandbox = FolderSandbox({
        "/logs/agent": {
            "agent.log": f"key={SECRET}\nagain {SECRET}\n".encode(),
            "deep/raw.bin": b"\x00\xff" + SECRET.encode() + b"\x00",
            "clean.log": b"nothing to hide\n",
        },
        "/app/results": {"r.txt": b"ok"},
    })  # fmt: skip
    ctx, _ = context(tmp_path, sandbox, secrets=[SECRET])
    collect_outputs(ctx)
    logs = tmp_path / "out" / "logs"
    assert (logs / "agent.log").read_bytes() == b"key=***\nagain ***\n"
    assert (logs / "deep" / "raw.bin").read_bytes() == b"\x00\xff***\x00"
    assert (logs / "clean.log").read_bytes() == b"nothing to hide\n"


def test_without_secrets_logs_are_kept_as_they_are(tmp_path: Path):
    sandbox = FolderSandbox({"/logs/agent": {"agent.log": b"***\nsk\n"}, "/app/results": {"r.txt": b"ok"}})
    ctx, _ = context(tmp_path, sandbox)
    collect_outputs(ctx)
    assert (tmp_path / "out" / "logs" / "agent.log").read_bytes() == b"***\nsk\n"


def test_a_missing_folder_is_said_and_the_rest_collected(tmp_path: Path):
    ctx, lines = context(tmp_path, FolderSandbox({"/app/results": {"r.txt": b"ok"}}))
    collect_outputs(ctx)
    assert lines == [
        "/logs/agent does not exist in the sandbox",
        "/app/assets does not exist in the sandbox",
        "collected 1 result file(s)",
    ]
    assert (tmp_path / "out" / "results" / "r.txt").read_bytes() == b"ok"


@pytest.mark.parametrize("results", [None, {}])
def test_no_results_fail_the_stage_saying_what_to_do(tmp_path: Path, results):
    folders = {"/logs/agent": {"agent.log": b"done\n"}}
    if results is not None:
        folders["/app/results"] = results
    ctx, _ = context(tmp_path, FolderSandbox(folders))
    with pytest.raises(StageError) as err:
        collect_outputs(ctx)
    assert err.value.stage == "collect"
    assert err.value.message == (
        "the agent finished with nothing in /app/results: results are the run's contract, "
        "so have the runbook write its deliverables to {{results_dir}}"
    )
    assert ctx.record.outputs.results_files == [] and ctx.record.outputs.primary_files == []
    assert (tmp_path / "out" / "logs" / "agent.log").exists(), "the logs are still kept"


def test_primary_outputs_come_first_in_their_order_and_a_missing_one_is_warned(tmp_path: Path):
    results = {"a.txt": b"a", "b/c.json": b"{}", "report.md": b"# r", "z.csv": b"1"}
    ctx, lines = context(
        tmp_path, FolderSandbox({"/app/results": results}), primary=["z.csv", "missing.pdf", "report.md"]
    )
    collect_outputs(ctx)
    assert ctx.record.outputs.primary_files == ["z.csv", "report.md"]
    assert [f.path for f in ctx.record.outputs.results_files] == ["z.csv", "report.md", "a.txt", "b/c.json"]
    first = ctx.record.outputs.results_files[0]
    assert (first.content_type, first.extension, first.size) == ("text/csv", "csv", 1)
    assert "warning: primary output missing.pdf was not produced" in lines


def test_a_second_name_of_a_file_is_kept_and_what_is_no_file_is_named(tmp_path: Path):
    sandbox = FolderSandbox(
        {
            "/app/results": {
                "a.txt": b"both names",
                "b.txt": Special(tarfile.LNKTYPE, "TOP/a.txt"),
                "sub/c.txt": Special(tarfile.LNKTYPE, "TOP/a.txt"),
                "pipe": Special(tarfile.FIFOTYPE),
                "tty": Special(tarfile.CHRTYPE),
                "disk": Special(tarfile.BLKTYPE),
                "link": Special(tarfile.SYMTYPE, "a.txt"),
                "gone.txt": Special(tarfile.LNKTYPE, "elsewhere/x.txt"),
            }
        },
        sockets=("/app/results/sock",),
    )
    ctx, lines = context(tmp_path, sandbox)
    collect_outputs(ctx)
    results = tmp_path / "out" / "results"
    for name in ("a.txt", "b.txt", "sub/c.txt"):
        assert (results / name).read_bytes() == b"both names", name
        assert (results / name).stat().st_nlink == 1  # a file of its own, not a link
    assert sorted(r.path for r in ctx.record.outputs.results_files) == ["a.txt", "b.txt", "sub/c.txt"]
    [warning] = ctx.record.outputs.warnings
    for named in ("/app/results/pipe: a named pipe", "/app/results/tty: a character device",
                  "/app/results/disk: a block device", "/app/results/link: a symbolic link",
                  "/app/results/gone.txt: a hard link to elsewhere/x.txt", "/app/results/sock: a socket"):  # fmt: skip
        assert named in warning, (named, warning)
    assert f"warning: {warning}" in lines
    assert not any((results / name).exists() for name in ("pipe", "tty", "disk", "link", "gone.txt"))


def test_a_hard_link_counts_against_the_output_budget(tmp_path: Path):
    sandbox = FolderSandbox({"/app/results": {"a": b"x" * 10, "b": Special(tarfile.LNKTYPE, "TOP/a")}})
    ctx, _ = context(tmp_path, sandbox)
    ctx.settings = Settings(home=tmp_path / "home", max_output_files=1)
    with pytest.raises(StageError, match="more than 1 files"):
        collect_outputs(ctx)


def test_outputs_past_the_limit_keep_the_first_files_by_name_either_way(tmp_path: Path):
    sandbox = FolderSandbox(
        {"/app/results": {"part3.bin": b"3" * 10, "part1.bin": b"1" * 10, "part2.bin": b"2" * 10}}
    )
    ctx, _ = context(tmp_path, sandbox)
    ctx.settings = Settings(home=tmp_path / "home", max_output_bytes=25)
    with pytest.raises(StageError, match="PIER_MAX_OUTPUT_BYTES"):
        collect_outputs(ctx)
    assert sorted(p.name for p in (tmp_path / "out" / "results").iterdir()) == ["part1.bin", "part2.bin"]


def test_the_look_and_the_three_folders_come_out_of_one_exec_and_no_archive_read(tmp_path: Path, way: str):
    """One exec where the sandbox has tar (the look, then the tar, on one stdout):
    the fake has no `exec`, so a second exec for the look would fail here."""
    sandbox = FolderSandbox({
        "/logs/agent": {"agent.log": b"hello\n"},
        "/app/results": {"r.txt": b"ok"},
        "/app/assets": {"in.txt": b"in"},
    })  # fmt: skip
    ctx, _ = context(tmp_path, sandbox)
    collect_outputs(ctx)
    expected = ["look"] if way == "tar" else ["look", "/logs/agent", "/app/results", "/app/assets"]
    assert sandbox.reads == expected
    assert not sandbox.stopped_early, "read to its end: closed without a kill (an exec of its own)"
    assert (tmp_path / "out" / "assets" / "in.txt").read_bytes() == b"in"


@pytest.mark.parametrize(
    "failure, said",
    [
        ("exit", "it exited 2: tar: something failed"),
        ("refused", "the sandbox filled its disk limit of 1G and was stopped"),
    ],
)
def test_a_failing_tar_leaves_nothing_of_its_own_and_the_archives_are_read(
    tmp_path: Path, way: str, failure: str, said: str
):
    sandbox = FolderSandbox({"/logs/agent": {"agent.log": b"hello\n"}, "/app/results": {"r.txt": b"ok"}})
    sandbox.tar_exit = 2 if failure == "exit" else 0
    sandbox.exec_refused = failure == "refused"
    ctx, lines = context(tmp_path, sandbox)
    collect_outputs(ctx)
    if way == "tar":
        assert sandbox.reads == ["look", "/logs/agent", "/app/results", "/app/assets"]
        assert (
            lines[0]
            == f"tar in the sandbox did not copy the output folders out, {said}; reading them one by one"
        )
    assert (tmp_path / "out" / "results" / "r.txt").read_bytes() == b"ok"
    assert ctx.record.outputs.warnings == [] and lines[-1] == "collected 1 result file(s)"


def test_the_survey_reads_tar_the_folders_and_what_is_no_folder():
    lines = ["tar", "dir /app/results", "other /app/assets", "dir /etc", "bytes 12", "p /app/results/f"]
    assert parse_survey(lines) == Survey(
        12, ("/app/results/f: a named pipe (fifo)",), True, ("/app/results",), ("/app/assets",)
    )


def test_what_stops_collect_before_reading_stops_the_exec_and_nothing_is_read(tmp_path: Path, way: str):
    """The stage checks the scratch disk's room between the look and the read."""
    sandbox = FolderSandbox({"/logs/agent": {"agent.log": b"hello\n"}, "/app/results": {"r.txt": b"ok"}})
    ctx, _ = context(tmp_path, sandbox)
    seen: list[Survey] = []

    def no_room(found: Survey) -> None:
        seen.append(found)
        raise StageError("collect", "no room")

    with pytest.raises(StageError, match="no room"):
        collect_outputs(ctx, before_reading=no_room)
    assert seen[0].bytes == len(b"hello\n") + len(b"ok")
    assert sandbox.reads == ["look"]
    assert sandbox.stopped_early or way == "archives", "the tar is stopped, not read"
    assert not (tmp_path / "out" / "results").exists()


def test_a_look_that_never_ends_its_lines_is_no_look_and_the_archives_are_read(tmp_path: Path, way: str):
    """The script failed before its marker (no bash?): an unknown size, the archives."""
    sandbox = FolderSandbox({"/app/results": {"r.txt": b"ok"}})
    sandbox.exec_stdout = lambda argv, **_kw: StdoutStream(  # type: ignore[method-assign]
        iter([b"bash: something broke\n"]), lambda: ExecResult(127, "", 0.0), lambda: None
    )
    ctx, _ = context(tmp_path, sandbox)
    sizes: list[int | None] = []
    collect_outputs(ctx, before_reading=lambda found: sizes.append(found.bytes))
    assert sizes == [None]
    assert sandbox.reads == ["/logs/agent", "/app/results", "/app/assets"]
    assert (tmp_path / "out" / "results" / "r.txt").read_bytes() == b"ok"


def test_a_look_that_hangs_is_stopped_at_the_cleanup_timeout_and_the_archives_are_read(tmp_path: Path):
    """The look is bounded as the exec it once was (PIER_CLEANUP_TIMEOUT_SEC)."""
    sandbox = FolderSandbox({"/app/results": {"r.txt": b"ok"}})
    closed = threading.Event()

    def hanging() -> Iterator[bytes]:
        yield b"bytes 2\n"
        closed.wait(30)  # a du or find that never ends: until the stream is closed

    sandbox.exec_stdout = lambda argv, **_kw: StdoutStream(  # type: ignore[method-assign]
        hanging(), lambda: ExecResult(0, "", 0.0), closed.set
    )
    ctx, lines = context(tmp_path, sandbox)
    ctx.settings = Settings(home=tmp_path / "home", cleanup_timeout_sec=1)
    began = time.monotonic()
    collect_outputs(ctx)
    assert 1 <= time.monotonic() - began < 10 and closed.is_set()
    assert (
        "the look inside the sandbox took more than 1 s (PIER_CLEANUP_TIMEOUT_SEC) and was stopped" in lines
    )
    assert sandbox.reads == ["/logs/agent", "/app/results", "/app/assets"]
    assert (tmp_path / "out" / "results" / "r.txt").read_bytes() == b"ok"
