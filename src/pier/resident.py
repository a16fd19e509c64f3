"""The resident process a local `pier run` hands its run to, and the client
half that hands it over (pier.launch, the `pier` command's entry point, decides
when).

A `pier run` spends most of its own time importing pier (pydantic, SQLAlchemy,
the docker SDK, the lifecycle) before the engine does anything. So, as the
Docker CLI hands its work to a daemon, `pier run` hands its command line to a
resident process of the same pier that has those imports done: the resident
forks, the child takes the client's stdin, stdout and stderr (passed over a
Unix socket), its working folder, environment and umask, and runs the very same
command; the client forwards Ctrl-C, SIGTERM and SIGHUP to it and exits with
its exit code. Settings are read in the child, from the client's environment,
so one resident serves every PIER_HOME and configuration.

Nothing is started by hand: a `pier run` that finds no resident runs in-process
as before and starts one in the background for the runs after it. The resident
exits after RESIDENT_IDLE_SEC without a run, and is per user, per interpreter
and per pier source (a changed file means a new socket, so an edit or an upgrade
is never served by old code), and per control group. PIER_RESIDENT=false turns
all of this off; in a CI job (CI=true and the like) it is off unless
PIER_RESIDENT=true.

A run is started once or not at all: the child waits for the client's go
before it runs anything, and the client falls back to running in-process only
when no child has said it is there. A client that dies (SIGKILL) is seen by its
child, which then cancels the run as a SIGTERM would.

This module imports only the standard library at its top: its client half runs
before anything else of pier is imported."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

RESIDENT_IDLE_SEC = 600.0
REPLY_TIMEOUT_SEC = 5.0  # for the child's first word; past it the run is done in-process
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# What a local `pier run` imports (pier's lazy imports included), for the resident to hold.
WARM_MODULES = (
    "pier.cli", "pier.cli.run", "pier.cli.progress", "pier.lifecycle.start", "pier.lifecycle.interrupts",
    "pier.runbook", "pier.tasks", "pier.settings", "pier.sandbox.docker.backend", "pier.db", "pier.db.retry",
    "pier.storage", "sqlalchemy.dialects.sqlite", "sqlite3", "netrc", "typer._adapters", "rich._emoji_codes",
)  # fmt: skip
PACKAGE = Path(__file__).resolve().parent


def resident_dir() -> Path | None:
    """This user's folder for residents' sockets (made 0700), or None when it is
    not this user's alone."""
    base = os.environ.get("PIER_RESIDENT_DIR")
    if base:
        folder = Path(base)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        folder = Path(os.environ["XDG_RUNTIME_DIR"]) / "pier"
    else:
        folder = Path.home() / ".cache" / "pier" / "resident"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        found = folder.stat()
    except OSError:
        return None
    if found.st_uid != os.getuid() or found.st_mode & 0o077:
        return None
    return folder


def source_token() -> str:
    """Names this interpreter and this pier's source as it is on disk now."""
    # PYTHONPATH too: a child imports (a backend named by module) with the resident's sys.path.
    # And the control group: a child runs in the resident's, which a CI job's or a
    # service's clean-up kills with it, and whose limits and accounting apply.
    python_path = os.environ.get("PYTHONPATH", "")
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{PACKAGE}\0{python_path}\0{cgroup}".encode())
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                found = os.stat(os.path.join(root, name))
                digest.update(f"{root}/{name}\0{found.st_mtime_ns}\0{found.st_size}\n".encode())
    return digest.hexdigest()[:20]


def socket_path() -> Path | None:
    folder = resident_dir()
    return None if folder is None else folder / f"{source_token()}.sock"


# --- the client ----------------------------------------------------------------


def hand_over(argv: list[str], path: Path | None) -> int | None:
    """The command's exit code once the resident's child at path (socket_path())
    has run it; None when no resident took it (nothing was run: the caller runs
    it in-process)."""
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(REPLY_TIMEOUT_SEC)
        conn.connect(str(path))
        header = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask()}
        socket.send_fds(conn, [_line(header)], [0, 1, 2])
        reader = conn.makefile("rb")
        first = json.loads(reader.readline() or b"{}")
        child = first.get("pid")
        if not isinstance(child, int):
            return None  # refused, or gone: the run was not started
    except (OSError, ValueError):
        conn.close()
        return None
    return _follow(conn, reader, child)


def _line(message: dict[str, Any]) -> bytes:
    """One message of the protocol: a JSON object on a line."""
    return json.dumps(message).encode() + b"\n"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _follow(conn: socket.socket, reader: Any, child: int) -> int:
    """Say go, forward signals to the child, and wait for its exit code."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    try:
        conn.settimeout(None)
        conn.sendall(b"go\n")
        while True:
            try:
                line = reader.readline()
            except InterruptedError:
                continue
            if not line:
                break
            message = json.loads(line)
            if "exit" in message:
                return int(message["exit"])
    except (OSError, ValueError):
        pass
    sys.stderr.write(
        "pier: the resident pier process ended before the run's exit code reached this command; "
        "`pier runs` shows how the run ended\n"
    )
    return 1


def start_resident(path: Path) -> None:
    """Start a resident on path (socket_path()) in the background, for the next
    `pier run` (best effort)."""
    import subprocess

    log = path.with_suffix(".log")
    try:
        with open(log, "ab") as out:
            subprocess.Popen(
                [sys.executable, "-P", "-m", "pier.resident", "serve", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd="/",
                close_fds=True,
            )
    except OSError:
        pass


# --- the resident ----------------------------------------------------------------


def serve(path: Path) -> None:
    """Accept runs on path until RESIDENT_IDLE_SEC pass without one (and none is
    running). One resident per path: a second one exits at once."""
    import fcntl
    import select
    import time

    lock = os.open(str(path.with_suffix(".lock")), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another resident serves this path
    _warm()
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    inode = os.stat(path).st_ino
    listener.listen(64)
    listener.setblocking(False)
    # A child's end wakes the loop at once (its exit code is what its client waits
    # for); children are reaped only here, never inside a signal handler.
    ended, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake)
    resident = _Resident(listener, lock, (ended, wake))
    last = time.monotonic()
    try:
        while resident.children or time.monotonic() - last < RESIDENT_IDLE_SEC:
            resident.reap()
            if not _still_ours(path, inode):
                break  # removed, or another resident's now: it can no longer be reached
            readable, _, _ = select.select([listener.fileno(), ended], [], [], 1.0)
            if ended in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(ended, 4096)
            if listener.fileno() not in readable:
                continue
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            last = time.monotonic()
            resident.take(conn)
    finally:
        listener.close()  # first: a client connecting now is refused at once, and runs in-process
        with contextlib.suppress(OSError):
            if _still_ours(path, inode):
                path.unlink()
    while resident.children:  # what runs is finished, and its client told
        resident.reap()
        time.sleep(0.2)


def _warm() -> None:
    """Import what a `pier run` imports, so that each child starts with it done
    (bench/overhead.py shows what is left: a module missed here is imported by
    every child again)."""
    import importlib

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part (a driver, a library's private module that moved)
            continue


def _still_ours(path: Path, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


class _Resident:
    """The resident's children, each with its client's connection: a child says
    its exit code itself; the resident says it too once the child has ended,
    which covers a child killed before it could."""

    def __init__(self, listener: socket.socket, lock: int, wake: tuple[int, int]):
        self.listener = listener
        self.lock = lock
        self.wake = wake  # the self-pipe SIGCHLD writes to
        self.children: dict[int, socket.socket] = {}

    def reap(self) -> None:
        """Send each ended child's exit status to its client."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                conn.sendall(_line({"exit": code if code >= 0 else 128 - code}))
            conn.close()

    def take(self, conn: socket.socket) -> None:
        """Read one client's header and descriptors and fork the child that runs it."""
        fds: list[int] = []
        try:
            conn.settimeout(REPLY_TIMEOUT_SEC)
            if not _same_user(conn):
                raise OSError("another user's client")
            data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
            while not data.endswith(b"\n"):
                more = conn.recv(1 << 16)
                if not more:
                    raise OSError("the client went away")
                data += more
            header = json.loads(data)
            if len(fds) != 3:
                raise OSError("the client's descriptors did not arrive")
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        pid = os.fork()
        if pid == 0:  # the child: never returns
            self.listener.close()
            os.close(self.lock)  # the resident's lock is its own: a child may outlive it
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in self.wake:
                os.close(fd)
            for other in self.children.values():
                other.close()
            _child(conn, header, fds)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn


def _same_user(conn: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the folder is this user's alone (resident_dir)
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _child(conn: socket.socket, header: dict[str, Any], fds: list[int]) -> None:
    """Become the client's `pier run`: its descriptors, folder, environment and
    umask; wait for its go; run the command; exit with its code."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(header["cwd"])
        os.environ.clear()
        os.environ.update(header["env"])
        os.umask(int(header["umask"]))
        _fresh_streams()
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
        try:
            conn.sendall(_line({"pid": os.getpid()}))
            go = conn.makefile("rb").readline().strip() == b"go"
        except OSError:
            go = False
        if not go:
            os._exit(0)  # the client gave up waiting: it runs the command itself
        conn.settimeout(None)
        _watch_client(conn)
        code = _run(header["argv"])
    except BaseException:  # a child must never return into the resident's loop
        import traceback

        traceback.print_exc()
    finally:
        _ENDING.append(True)  # the client closing the connection now is no cancel
        with contextlib.suppress(OSError):  # the client need not wait for the resident's word
            conn.sendall(_line({"exit": code}))
        os._exit(code)


_ENDING: list[bool] = []  # set by a child once its command has ended


def _fresh_streams() -> None:
    """sys.stdin/stdout/stderr over the client's descriptors, buffered as Python
    would have buffered them there (line-buffered on a terminal)."""
    import tempfile

    tempfile.tempdir = None  # TMPDIR is the client's now
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = (os.environ.get("PYTHONIOENCODING") or "utf-8").split(":")[0] or "utf-8"
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    for fd, name in ((1, "stdout"), (2, "stderr")):
        interactive = os.isatty(fd)
        stream = open(  # noqa: SIM115
            fd, "w", encoding=encoding, closefd=False, errors="backslashreplace" if fd == 2 else "strict",
            buffering=1 if (interactive or fd == 2) and not unbuffered else -1,
        )  # fmt: skip
        if unbuffered:
            stream.reconfigure(write_through=True)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _watch_client(conn: socket.socket) -> None:
    """A client that goes away (killed) cancels the run, as a SIGTERM would."""
    import threading

    def watch() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(64):
                pass
        if not _ENDING:
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="pier-client-watch", daemon=True).start()


def _run(argv: list[str]) -> int:
    """The command as `pier` runs it; its exit code."""
    import atexit

    from pier.cli import app
    from pier.settings import get_settings

    get_settings.cache_clear()
    sys.argv = ["pier", *argv]
    try:
        app(args=argv, prog_name="pier")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) != 3:
        sys.exit("usage: python -m pier.resident serve SOCKET (a pier run starts it)")
    serve(Path(sys.argv[2]))
