"""The host's fence around pier's sandbox networks (iptables on the engine's
machine). Two rules per bridge interface pier's sandboxes sit behind:

- INPUT from the bridge jumps to CHAIN, which accepts replies and the (address,
  port) pairs admitted (pier's model gateway and egress proxy, and the host
  services the operator names), and rejects the rest. Every address of this
  machine is covered: the bridge's own gateway, the other interfaces' addresses,
  other Docker networks' gateways all arrive on INPUT through that bridge.
- FORWARD from the bridge back into the same bridge is rejected (in DOCKER-USER,
  which the engine evaluates before its own rules): one sandbox never reaches
  another, even on a network created without `enable_icc=false`. Traffic to other
  Docker networks is already dropped by the engine's own isolation chains.

The same in ip6tables, reject only (pier serves no sandbox over IPv6).

Rules are never flushed: several pier processes share them (one file lock
orders them, `iptables -w` the kernel table), each adds its own ports, and `-C`
first makes every addition idempotent. Nothing outside pier's bridges is
matched, so other containers on the engine are untouched.

Each port's ACCEPT rule carries its owner in a comment (`pier owner=NS:PID:START`:
the process's PID namespace, its id and its start time, so a reused id is not
mistaken for it). A pier process takes its rules back when it exits, and the
first fence call of every pier process removes the rules whose owner is gone (a
process that was killed or crashed), so a port a stopped pier listened on is not
left open for whatever takes it next. Rules of another PID namespace are not
judged (their owner cannot be looked up from here). A rule without an owner
(made by pier before owners were recorded) is removed once nothing on the
machine listens on its port: a live older pier listens on every port it admitted.

Best effort by nature: without the binary or the right, each function returns
why, and the caller says it as a warning."""

from __future__ import annotations

import atexit
import fcntl
import functools
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

CHAIN = "PIER-EGRESS"  # the name allow-list mode always used: older pier processes share it
FORWARD_HOOK = "DOCKER-USER"
LOCK_NAME = "pier-fence.lock"
OWNER_PREFIX = "pier owner="
_thread_lock = threading.Lock()
_done: set[tuple[str, ...]] = set()  # rules this process has seen in place
_owned: set[tuple[str, ...]] = set()  # ACCEPT rules this process added, taken back at exit
_state = {"swept": False, "exit_hook": False}

log = logging.getLogger(__name__)


def _forget_in_child() -> None:
    """A forked child owns nothing of its parent's: it judges and adds its own."""
    _done.clear()
    _owned.clear()
    _state.update(swept=False, exit_hook=False)


os.register_at_fork(after_in_child=_forget_in_child)


def fence_bridge(interface: str, admitted: Iterable[tuple[str, int]] = ()) -> str | None:
    """Sandboxes behind `interface` reach no other sandbox there and, on this
    machine, only the `admitted` (address, port) pairs (and what admit() adds
    later). Returns why the fence could not be put up, or None."""
    rules = [
        ("iptables", "INPUT", "-i", interface, "-j", CHAIN),
        ("iptables", _forward_hook(), "-i", interface, "-o", interface, *_REJECT),
        ("ip6tables", "INPUT", "-i", interface, *_REJECT),
        ("ip6tables", "FORWARD", "-i", interface, "-o", interface, *_REJECT),
        *(_accept(address, port) for address, port in admitted),
    ]
    return _ensure_all(rules)


def admit(address: str, port: int) -> str | None:
    """Let fenced sandboxes reach TCP `port` on this machine's `address` (a pier
    service; "0.0.0.0" for any of its addresses). Returns why it could not, or None."""
    return _ensure_all([_accept(address, port)])


def withdraw(address: str, port: int) -> None:
    """Take back this process's admit() (for a service that stopped for good).
    Idempotent; never raises: a rule left behind is removed when this process
    exits, or by the next pier process once it is gone."""
    rule = _accept(address, port)
    _done.discard(rule)
    _owned.discard(rule)
    try:
        with _locked():
            _delete(rule)
    except (OSError, subprocess.SubprocessError):
        return


def sweep() -> list[str]:
    """Remove CHAIN's ACCEPT rules whose owner process is gone; the rules removed
    (as `iptables -S` shows them). Never raises."""
    try:
        with _locked():
            return _sweep_locked()
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("fence: could not sweep %s: %s", CHAIN, exc)
        return []


def owner_gone(owner: str) -> bool:
    """Whether the process an owner comment names (NS:PID:START) has ended. False
    for another PID namespace's process or a comment not of this form: pier
    removes only what it knows to be dead."""
    parts = owner.split(":")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return False
    namespace, pid, start = parts
    if namespace != _pid_namespace():
        return False
    return _start_time(int(pid)) != start


def fence_problem() -> str | None:
    """Why sandboxes could not be fenced off this machine's services, or None
    (the binary is there and pier may read the filter table)."""
    for binary in ("iptables", "ip6tables"):
        if not shutil.which(binary):
            return f"{binary} is not installed"
        try:
            done = _run(binary, ["-nL", "INPUT"])
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{binary} failed: {exc}"
        if done.returncode != 0:
            return f"{binary} refused: {done.stderr.strip()[:300]}"
    return None


_REJECT = ("-j", "REJECT")


def _accept(address: str, port: int) -> tuple[str, ...]:
    where = () if address in ("0.0.0.0", "") else ("-d", address)
    me = _me()
    owner = ("-m", "comment", "--comment", OWNER_PREFIX + me) if me else ()
    return ("iptables", CHAIN, *where, "-p", "tcp", "--dport", str(port), *owner, "-j", "ACCEPT")


def _me() -> str | None:
    """This process as an owner comment names it, or None without /proc."""
    return _owner_for(os.getpid())


@functools.cache
def _owner_for(pid: int) -> str | None:
    start = _start_time(pid)
    namespace = _pid_namespace()
    return f"{namespace}:{pid}:{start}" if start and namespace else None


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22),
    or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name (field 2) may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def _sweep_locked() -> list[str]:
    listing = _run("iptables", ["-S", CHAIN])
    if listing.returncode != 0:
        return []
    removed = []
    listening: set[int] | None = None
    for line in listing.stdout.splitlines():
        words = shlex.split(line)
        if words[:2] != ["-A", CHAIN] or "--dport" not in words:
            continue
        if "--comment" in words:
            comment = words[words.index("--comment") + 1]
            gone = comment.startswith(OWNER_PREFIX) and owner_gone(comment.removeprefix(OWNER_PREFIX))
        else:  # an older pier's, which recorded no owner: gone once nothing listens on its port
            listening = _listening_ports() if listening is None else listening
            port = words[words.index("--dport") + 1]
            gone = port.isdigit() and int(port) not in listening
        if gone and _run("iptables", ["-D", *words[1:]]).returncode == 0:
            removed.append(line)
    if removed:
        log.info("fence: removed %d rule(s) of pier processes that are gone", len(removed))
    return removed


def _listening_ports() -> set[int]:
    """The TCP ports something on this machine (this network namespace) listens
    on, from the kernel's socket tables."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # TCP_LISTEN
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return ports


def _delete(rule: tuple[str, ...]) -> None:
    while _run(rule[0], ["-D", *rule[1:]]).returncode == 0:
        pass


def _take_back_owned() -> None:
    """At exit: this process's ports close with it."""
    rules = list(_owned)
    _owned.clear()
    if not rules:
        return
    try:
        with _locked():
            for rule in rules:
                _delete(rule)
    except (OSError, subprocess.SubprocessError):
        return  # the next pier process removes them: their owner is gone


@functools.cache
def _forward_hook() -> str:
    """DOCKER-USER where the engine made it (evaluated before the engine's own
    accept rules), else FORWARD itself."""
    try:
        found = _run("iptables", ["-nL", FORWARD_HOOK]).returncode == 0
    except (OSError, subprocess.SubprocessError):
        found = False
    return FORWARD_HOOK if found else "FORWARD"


def _ensure_all(rules: list[tuple[str, ...]]) -> str | None:
    """Every rule in place (each one tried even when another failed); the first
    reason one could not be, or None."""
    missing = [rule for rule in rules if rule not in _done and _applies(rule[0])]
    if not missing:
        return None
    problems: list[str] = []
    try:
        with _locked():
            if not _state["swept"] and shutil.which("iptables"):
                _state["swept"] = True
                try:
                    _sweep_locked()
                except (OSError, subprocess.SubprocessError) as exc:  # the next start tries again
                    log.debug("fence: could not sweep %s: %s", CHAIN, exc)
            for rule in missing:
                problem = _try(rule)
                if problem is None:
                    _done.add(rule)
                    _own(rule)
                else:
                    problems.append(problem)
    except OSError as exc:
        return f"the fence's lock file could not be opened: {exc}"
    return problems[0] if problems else None


def _own(rule: tuple[str, ...]) -> None:
    if OWNER_PREFIX + str(_me()) not in rule:
        return
    _owned.add(rule)
    if not _state["exit_hook"]:
        _state["exit_hook"] = True
        atexit.register(_take_back_owned)


def _applies(binary: str) -> bool:
    """IPv6 rules only where the kernel has IPv6 at all."""
    return binary != "ip6tables" or Path("/proc/net/if_inet6").exists()


def _try(rule: tuple[str, ...]) -> str | None:
    if not shutil.which(rule[0]):
        return f"{rule[0]} is not installed"
    try:
        if rule[0] == "iptables" and CHAIN in rule:  # as a chain or a jump target
            _ensure_chain()
        _ensure(rule)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        return f"{rule[0]} refused: {str(detail).strip()[:300]}"
    return None


@contextmanager
def _locked() -> Iterator[None]:
    """This process's threads, then every pier process on the machine, one at a
    time: `-C` then `-I` is not atomic, and two at once would add a rule twice."""
    with _thread_lock, open(_lock_path(), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_path() -> Path:
    run_lock = Path("/run/lock")
    folder = run_lock if run_lock.is_dir() and os.access(run_lock, os.W_OK) else Path(tempfile.gettempdir())
    return folder / LOCK_NAME


def _ensure_chain() -> None:
    """CHAIN with its two fixed rules at the end: replies pass, the rest is refused."""
    if ("chain",) in _done:
        return
    if _run("iptables", ["-nL", CHAIN]).returncode != 0:
        _run("iptables", ["-N", CHAIN], check=True)
        _run(
            "iptables",
            ["-A", CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
            check=True,
        )
        _run("iptables", ["-A", CHAIN, *_REJECT, "--reject-with", "icmp-port-unreachable"], check=True)
    _done.add(("chain",))


def _ensure(rule: tuple[str, ...]) -> None:
    """Insert the rule first in its chain unless it is there already."""
    binary, chain, spec = rule[0], rule[1], list(rule[2:])
    if _run(binary, ["-C", chain, *spec]).returncode == 0:
        return
    _run(binary, ["-I", chain, "1", *spec], check=True)


def _run(binary: str, args: list[str], check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, "-w", "5", *args], capture_output=True, text=True, check=check, timeout=30)
