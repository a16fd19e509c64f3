"""collect: copy /logs/agent, /app/results and /app/assets out of the sandbox into
the run's storage folder, and describe the results (primary outputs first).

One exec does it all where the sandbox has tar (COLLECT): it looks at the
folders first (their size, which are folders, what in them no archive keeps),
prints that, then streams one `tar -c` of the folders on the same stdout
(Sandbox.exec_stdout). pier reads the look, checks the scratch disk has room,
then reads the tar: one exec, where a look and a tar took two and the engine's
archive reads one call per folder. Where the sandbox has no tar, or tar fails
(a file it cannot read), each folder is read by the engine's archive call
instead, as before: what tar wrote is removed first."""

from __future__ import annotations

import itertools
import os
import shutil
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pier.errors import PierError, SandboxError, StageError
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import Outcome
from pier.redact import Redactor
from pier.sandbox.base import Sandbox, StdoutStream
from pier.sandbox.tarutil import Budget, OverBudget, extract_routed, extract_stream
from pier.storage.files import describe

REDACT_LINE_BYTES = 8 << 20
OUTPUT_DIRS = {"logs": "/logs/agent", "results": "/app/results", "assets": "/app/assets"}
# The look inside before the folders are read, and the read, as one bash
# script (one exec: each is three round trips to the engine, and collect's time
# under a burst is the engine's). The look prints, a line each: the bytes the
# output folders hold, for the scratch disk's check (save.py); whether tar
# is there ("tar"); which output folders are folders
# ("dir PATH"; "other PATH": there, but a file or a link, which yields nothing,
# as the engine's archive of it would); then what in them is neither file nor
# folder nor link, as `find -printf '%y %p'` says it: archives leave sockets
# out without a word, and under gVisor the engine's leave fifos and devices out
# too (they live in the sandbox's own kernel). Then the script's $0 (a marker
# of pier's making, never guessed by what the agent wrote) on a line of its
# own, and, when tar is there and any folder is, the tar of those folders, in
# name order where tar takes --sort=name (GNU tar; busybox's does not): as the
# engine's archives are, so which files are kept when the outputs pass their
# limit does not hang on the disk's readdir order.
COLLECT = (
    "dirs='" + " ".join(OUTPUT_DIRS.values()) + "'; "
    "du -sb $dirs 2>/dev/null | awk '{s += $1} END {print \"bytes \" s + 0}'; "
    "tar=; sort=; if hash tar 2>/dev/null; then tar=1; echo tar; "
    "if tar --sort=name -c -f /dev/null -T /dev/null 2>/dev/null; then sort=--sort=name; fi; fi; "
    "set --; for d in $dirs; do "
    'if [ -d "$d" ] && [ ! -L "$d" ]; then echo "dir $d"; set -- "$@" "${d#/}"; '
    'elif [ -e "$d" ] || [ -L "$d" ]; then echo "other $d"; fi; done; '
    r"find $dirs \( -type s -o -type p -o -type b -o -type c \) -printf '%y %p\n' 2>/dev/null; "
    'echo "$0"; [ -n "$tar" ] && [ $# -gt 0 ] || exit 0; exec tar -c -f - $sort -C / "$@"'
)  # fmt: skip
MAX_LOOK_BYTES = 4 << 20  # a look longer than this (special files by the million) is not read
_FIND_KINDS = {"s": "a socket", "p": "a named pipe (fifo)", "b": "a block device", "c": "a character device"}


@dataclass(frozen=True)
class Survey:
    """What one look inside the sandbox found in its output folders."""

    bytes: int | None = None  # None: unknown (the look failed)
    special: tuple[str, ...] = ()  # "path: what it is", for what archives leave out
    tar: bool = False  # the sandbox has tar: the folders come out in one exec
    dirs: tuple[str, ...] = ()  # the output folders that are folders
    others: tuple[str, ...] = ()  # output paths that are there but no folder


def parse_survey(lines: list[str]) -> Survey:
    """What the look's lines say."""
    size: int | None = None
    special: list[str] = []
    tar = False
    dirs: list[str] = []
    others: list[str] = []
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "bytes" and rest.isdigit():
            size = int(rest)
        elif kind == "tar" and not rest:
            tar = True
        elif kind in ("dir", "other") and rest in OUTPUT_DIRS.values():
            (dirs if kind == "dir" else others).append(rest)
        elif rest and kind in _FIND_KINDS:
            special.append(f"{rest}: {_FIND_KINDS[kind]}")
    return Survey(size, tuple(special), tar, tuple(dirs), tuple(others))


@dataclass
class Look:
    """The look's Survey, and the exec's stream past it (the tar, when the
    survey found tar and a folder): `rest` are its bytes already read."""

    found: Survey
    stream: StdoutStream | None = None
    rest: bytes = b""

    def tar_chunks(self) -> Iterator[bytes]:
        assert self.stream is not None
        return itertools.chain([self.rest] if self.rest else [], self.stream)

    def close(self) -> None:
        """Stop the exec (killed when it has not ended) and the reading."""
        if self.stream is not None:
            self.stream.close()

    def drain(self) -> None:
        """Read the exec to its end where no tar follows the look (the script
        ends there): ended, it is closed without a kill, which would cost an
        exec of its own."""
        if self.stream is None:
            return
        try:
            for _chunk in self.stream:
                pass
        except PierError:  # the sandbox went meanwhile: close() stops what is left
            pass


def look(ctx: RunContext) -> Look:
    """Start COLLECT and read its look; an empty Survey (and no stream) when the
    sandbox cannot answer, or the look did not end (the script failed), or not
    within PIER_CLEANUP_TIMEOUT_SEC (the exec is stopped then; the tar after
    the look has no time limit, as the engine's archive reads have none)."""
    marker = f"pier-collect-{uuid.uuid4().hex}"
    try:
        stream = ctx.require_sandbox().exec_stdout(["bash", "-c", COLLECT, marker], workdir="/")
    except PierError as exc:  # a broken sandbox: collect's own error says so
        ctx.log(f"could not look at the output folders' size and special files: {exc}")
        return Look(Survey())
    late = threading.Event()

    def stop() -> None:
        late.set()
        stream.close()  # unblocks the read below

    timer = threading.Timer(ctx.settings.cleanup_timeout_sec, stop)
    timer.daemon = True
    timer.start()
    try:
        return _read_look(ctx, stream, marker)
    except Exception as exc:
        if not (late.is_set() or isinstance(exc, PierError)):
            raise
        ctx.log(f"could not look at the output folders' size and special files: {exc}")
    finally:
        timer.cancel()
        if late.is_set():
            ctx.log(
                f"the look inside the sandbox took more than {ctx.settings.cleanup_timeout_sec} s "
                "(PIER_CLEANUP_TIMEOUT_SEC) and was stopped"
            )
    stream.close()
    return Look(Survey())


def _read_look(ctx: RunContext, stream: StdoutStream, marker: str) -> Look:
    end = f"\n{marker}\n".encode()
    head = bytearray(b"\n")  # the marker's line is the first, or follows a newline
    for chunk in stream:
        searched = max(len(head) - len(end), 0)
        head += chunk
        at = head.find(end, searched)
        if at >= 0:
            lines = head[1:at].decode(errors="replace").splitlines()
            return Look(parse_survey(lines), stream, bytes(head[at + len(end) :]))
        if len(head) > MAX_LOOK_BYTES:
            break
    stream.close()
    return Look(Survey())


def collect_outputs(ctx: RunContext, before_reading: Callable[[Survey], None] = lambda _found: None) -> None:
    """Look inside and read the three folders: in the look's own exec when it
    found tar, else one after another by the engine's archives (the Docker
    engine keeps a container locked while an archive of it is being read, so
    asking for a second archive before the first is read to its end waits for
    ever; the look's exec has ended, or been stopped, before the first).
    `before_reading` is given the look's Survey before anything is read (the
    stage checks the scratch disk's room there; what it raises stops collect)."""
    found = look(ctx)
    try:
        before_reading(found.found)
    except BaseException:
        found.close()
        raise
    _read(ctx, found)


def _read(ctx: RunContext, found: Look) -> None:
    settings = ctx.settings
    sandbox = ctx.require_sandbox()
    skipped: list[str] = []
    try:
        try:
            present = [path for path in OUTPUT_DIRS.values() if path in found.found.dirs]
            if found.found.tar and present and found.stream is not None:
                by_tar = _tar_out(ctx, found, present, skipped)
            else:  # no tar (the engine's archives read the folders), or no folder: the script has ended
                found.drain()
                by_tar = found.found.tar and found.stream is not None
            _say_missing(ctx, found.found, by_tar)
        finally:
            found.close()
        if not by_tar:
            _by_archives(ctx, sandbox, skipped)
    except OverBudget as exc:
        raise StageError(
            "collect",
            f"{'/' + exc.top} holds {exc}: a run's outputs may be at most {settings.max_output_bytes} bytes in "
            f"{settings.max_output_files} files (PIER_MAX_OUTPUT_BYTES, PIER_MAX_OUTPUT_FILES); what fit "
            "was kept. Have the runbook write less, or ask the operator to raise the limits",
            Outcome.limit_reached,
        ) from None
    finally:  # the logs are stored even when a later folder fails to come out
        _cut_logs(ctx, ctx.output_dir / "logs")
        _redact_logs(ctx, ctx.output_dir / "logs")
        _say_skipped(ctx, skipped, found.found)
    results = ctx.output_dir / "results"
    files = sorted(p for p in results.rglob("*") if p.is_file()) if results.is_dir() else []
    _describe(ctx, results, files)
    if not files:
        raise StageError(
            "collect",
            "the agent finished with nothing in /app/results: results are the run's contract, "
            "so have the runbook write its deliverables to {{results_dir}}",
            Outcome.no_results,
        )
    ctx.log(f"collected {len(files)} result file(s)")


def _budget(ctx: RunContext) -> Budget:
    return Budget(ctx.settings.max_output_bytes, ctx.settings.max_output_files)


def _say_missing(ctx: RunContext, survey: Survey, by_tar: bool) -> None:
    """Where tar read the folders, which were not there (the archives say it themselves)."""
    if not by_tar:
        return
    for path in OUTPUT_DIRS.values():
        if path not in survey.dirs and path not in survey.others:
            ctx.log(f"{path} does not exist in the sandbox")


def _tar_out(ctx: RunContext, found: Look, present: list[str], skipped: list[str]) -> bool:
    """`present` out of the `tar -c` that follows the look on its stdout.
    False (and nothing of it left in the output folder) when tar failed or wrote
    no readable archive: the engine's archives are read then."""
    assert found.stream is not None
    routes = {
        path.lstrip("/"): ctx.output_dir / name for name, path in OUTPUT_DIRS.items() if path in present
    }
    mine: list[str] = []
    problem = ""
    try:
        try:
            extract_routed(found.tar_chunks(), routes, budget=_budget(ctx), skipped=mine)
            for _padding in found.stream:  # tar pads its archive past the end-of-archive blocks
                pass
        except tarfile.TarError as exc:
            problem = f"its archive could not be read ({exc})"
        except OverBudget:
            skipped.extend(mine)
            raise
        if not problem:
            ended = found.stream.result()
            if not ended.ok:
                problem = f"it exited {ended.exit_code}: {ended.output.strip()[-300:]}"
    except SandboxError as exc:  # the sandbox stopped meanwhile: the engine's archives may still read it
        problem = str(exc)
    if problem:
        found.close()  # before the archives: the engine reads none of a container while it is read
        ctx.log(f"tar in the sandbox did not copy the output folders out, {problem}; reading them one by one")
        for dest in routes.values():
            shutil.rmtree(dest, ignore_errors=True)
        return False
    skipped.extend(mine)
    return True


def _by_archives(ctx: RunContext, sandbox: Sandbox, skipped: list[str]) -> None:
    """Each folder by the engine's archive call, one after another."""
    budget = _budget(ctx)
    for name, path in OUTPUT_DIRS.items():
        try:
            _extract(sandbox, path, ctx.output_dir / name, budget, skipped)
        except FileNotFoundError:
            ctx.log(f"{path} does not exist in the sandbox")
        except OverBudget as exc:
            exc.top = path.lstrip("/")
            raise


def _extract(sandbox: Sandbox, path: str, dest: Path, budget: Budget, skipped: list[str]) -> None:
    """One folder's archive into dest, its stream released even when extraction
    stops midway (over budget), so the engine unlocks the container. What is not
    a file or a folder is added to `skipped` by its sandbox path."""
    stream = sandbox.get_archive(path)
    found: list[str] = []
    try:
        extract_stream(stream, dest, budget=budget, skipped=found)
    finally:
        skipped.extend(f"{path}/{entry}" for entry in found)
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _say_skipped(ctx: RunContext, skipped: list[str], found: Survey) -> None:
    """One warning naming what was not collected: what the archives held that is
    no file (fifos, devices, symbolic links), and what the survey found inside
    that they left out."""
    named = {entry.split(": ", 1)[0] for entry in skipped}
    skipped = [*skipped, *(entry for entry in found.special if entry.split(": ", 1)[0] not in named)]
    if not skipped:
        return
    shown = "; ".join(skipped[:20]) + (f"; and {len(skipped) - 20} more" if len(skipped) > 20 else "")
    note = f"not collected, as they are not regular files: {shown}"
    ctx.log(f"warning: {note}")
    ctx.record.outputs.warnings.append(note)


def _cut_logs(ctx: RunContext, logs: Path) -> None:
    """Each file of logs/ longer than PIER_MAX_LOG_BYTES keeps its first that
    many bytes, then a line saying how much was dropped; the run's warnings say
    it too. (The agent, root in its sandbox, may write there what it likes.)"""
    if not logs.is_dir():
        return
    cap = ctx.settings.max_log_bytes
    for file in sorted(logs.rglob("*")):
        if not file.is_file() or file.is_symlink():
            continue
        size = file.stat().st_size
        if size <= cap:
            continue
        with open(file, "r+b") as out:
            out.truncate(cap)
            out.seek(cap)
            out.write(
                f"\n[pier] cut here: {size - cap} bytes dropped past PIER_MAX_LOG_BYTES ({cap})\n".encode()
            )
        note = f"logs/{file.relative_to(logs)} was cut to {cap} bytes: {size - cap} bytes dropped (PIER_MAX_LOG_BYTES)"
        ctx.log(f"warning: {note}")
        ctx.record.outputs.warnings.append(note)


def _redact_logs(ctx: RunContext, logs: Path) -> None:
    if not ctx.redactor or not logs.is_dir():
        return
    for file in logs.rglob("*"):
        if file.is_file() and not file.is_symlink():
            _redact_file(ctx.redactor, file)


def _redact_file(redactor: Redactor, path: Path) -> None:
    """Mask secrets line by line into a copy that replaces the file when anything
    changed: a log of any size is never read whole. A line longer than
    REDACT_LINE_BYTES is masked in pieces of that size."""
    with open(path, "rb") as source, tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as out:
        changed = False
        while line := source.readline(REDACT_LINE_BYTES):
            clean = redactor.bytes(line)
            changed = changed or clean != line
            out.write(clean)
    if changed:
        os.chmod(out.name, path.stat().st_mode)
        os.replace(out.name, path)
    else:
        os.unlink(out.name)


def _describe(ctx: RunContext, results: Path, files: list[Path]) -> None:
    plan = ctx.require_plan()
    described = {str(f.relative_to(results)): describe(f, results) for f in files}
    primary = [p for p in plan.primary_outputs if p in described]
    for missing in (p for p in plan.primary_outputs if p not in described):
        ctx.log(f"warning: primary output {missing} was not produced")
    ordered = primary + [p for p in described if p not in primary]
    ctx.record.set_results([described[p] for p in ordered], primary)
