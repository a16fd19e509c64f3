"""The host fence's rules, against a stand-in iptables on PATH that keeps its
tables in a file (the real one needs root and would change this machine): every
rule matches one of pier's bridges or sits in pier's own chain, nothing is
added twice however many processes put the fence up at once, and a missing
binary is said, never skipped in silence."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pier.sandbox.docker import fence

FAKE = r'''#!PYTHON
"""iptables/ip6tables stand-in: -w N, then -nL, -N, -C, -I chain 1, -A, -D, -S."""
import fcntl, json, os, shlex, sys
state = os.environ["FAKE_IPTABLES_STATE"]
args = sys.argv[1:]
if args[:1] == ["-w"]:
    args = args[2:]
table = os.path.basename(sys.argv[0])
with open(state + ".lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    data = json.load(open(state)) if os.path.exists(state) else {}
    chains = data.setdefault(table, {"INPUT": [], "FORWARD": [], "DOCKER-USER": []})
    verb, chain, rest = args[0], args[1], args[2:]
    code = 0
    if verb == "-nL":
        code = 0 if chain in chains else 1
    elif verb == "-S":
        code = 0 if chain in chains else 1
        print("\n".join([f"-N {chain}"] + [f"-A {chain} {shlex.join(rule)}" for rule in chains.get(chain, [])]))
    elif verb == "-N":
        if chain in chains:
            sys.exit(1)
        chains[chain] = []
    elif verb == "-C":
        code = 0 if rest in chains.get(chain, []) else 1
    elif verb == "-I":
        chains[chain].insert(int(rest[0]) - 1, rest[1:])
    elif verb == "-A":
        chains[chain].append(rest)
    elif verb == "-D":
        code = 0 if rest in chains.get(chain, []) else 1
        if code == 0:
            chains[chain].remove(rest)
    json.dump(data, open(state, "w"))
sys.exit(code)
'''


@pytest.fixture
def fake_iptables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("iptables", "ip6tables"):
        script = bin_dir / name
        script.write_text(FAKE.replace("PYTHON", sys.executable))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "tables.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_IPTABLES_STATE", str(state))
    monkeypatch.setattr(fence, "_done", set())
    monkeypatch.setattr(fence, "_owned", set())
    monkeypatch.setattr(fence, "_state", {"swept": False, "exit_hook": True})  # no exit hook in pytest
    monkeypatch.setattr(fence, "_lock_path", lambda: tmp_path / "fence.lock")
    fence._forward_hook.cache_clear()
    return state


def owned(*rule: str, owner: str | None = None) -> list[str]:
    """An ACCEPT rule as pier adds it: its owner (this process unless said) in a comment."""
    *spec, jump, target = rule
    return [
        *spec,
        "-m",
        "comment",
        "--comment",
        fence.OWNER_PREFIX + (owner or str(fence._me())),
        jump,
        target,
    ]


def tables(state: Path) -> dict:
    return json.loads(state.read_text())


def test_every_rule_is_scoped_to_pier_s_bridge_or_chain(fake_iptables: Path):
    assert fence.fence_bridge("pier-sandbox", [("172.30.0.1", 5000)]) is None
    assert fence.admit("172.30.0.1", 41234) is None
    v4, v6 = tables(fake_iptables)["iptables"], tables(fake_iptables)["ip6tables"]
    assert v4["INPUT"] == [["-i", "pier-sandbox", "-j", fence.CHAIN]]
    assert v4["DOCKER-USER"] == [["-i", "pier-sandbox", "-o", "pier-sandbox", "-j", "REJECT"]]
    assert v4["FORWARD"] == []
    chain = v4[fence.CHAIN]
    assert chain[-2:] == [
        ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        ["-j", "REJECT", "--reject-with", "icmp-port-unreachable"],
    ]
    assert sorted(chain[:-2]) == sorted([
        owned("-d", "172.30.0.1", "-p", "tcp", "--dport", "5000", "-j", "ACCEPT"),
        owned("-d", "172.30.0.1", "-p", "tcp", "--dport", "41234", "-j", "ACCEPT"),
    ])  # fmt: skip
    if Path("/proc/net/if_inet6").exists():
        assert v6["INPUT"] == [["-i", "pier-sandbox", "-j", "REJECT"]]
        assert v6["FORWARD"] == [["-i", "pier-sandbox", "-o", "pier-sandbox", "-j", "REJECT"]]


def _fence_in_a_process(state: str, lock: str, interface: str, barrier) -> None:
    os.environ["FAKE_IPTABLES_STATE"] = state
    fence._lock_path = lambda: Path(lock)  # type: ignore[assignment]
    assert fence.fence_bridge(interface, [("172.30.0.1", 5000)]) is None
    barrier.wait(60)  # all alive until each has put its fence up (and swept)


def test_concurrent_processes_add_each_rule_once(fake_iptables: Path, tmp_path: Path):
    """Shared rules once; each process's own ACCEPT once, with its owner, until it is
    gone (these exit as a killed process would, without their exit hook: the next
    sweep removes their rules)."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(8)
    procs = [
        context.Process(
            target=_fence_in_a_process, args=(str(fake_iptables), str(tmp_path / "fence.lock"), name, barrier)
        )
        for name in ["pier-sandbox"] * 4 + ["pier-egress"] * 4
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    v4 = tables(fake_iptables)["iptables"]
    assert sorted(map(tuple, v4["INPUT"])) == [
        ("-i", "pier-egress", "-j", fence.CHAIN), ("-i", "pier-sandbox", "-j", fence.CHAIN),
    ]  # fmt: skip
    assert len(v4["DOCKER-USER"]) == 2
    accepts = v4[fence.CHAIN][:-2]  # then replies, the reject
    owners = {rule[rule.index("--comment") + 1] for rule in accepts}
    assert len(accepts) == len(owners) == 8, accepts
    assert len(fence.sweep()) == 8
    assert len(tables(fake_iptables)["iptables"][fence.CHAIN]) == 2


def test_without_the_binary_the_reason_is_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(fence, "_done", set())
    assert fence.fence_bridge("pier-sandbox") == "iptables is not installed"
    assert fence.admit("172.30.0.1", 1) == "iptables is not installed"
    assert fence.fence_problem() == "iptables is not installed"


def test_the_docker_backend_says_it_as_a_sandbox_note_and_at_start(tmp_path, monkeypatch, caplog):
    from pier.lifecycle.start import Services
    from pier.sandbox.base import InternalNetwork, Limits, SandboxSpec
    from pier.sandbox.docker.backend import DockerBackend
    from pier.settings import Settings

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(fence, "_done", set())
    settings = Settings(home=tmp_path / "home", docker_host="unix:///nonexistent.sock")
    backend = DockerBackend(settings)
    backend._networks[settings.sandbox_network] = InternalNetwork(
        "pier-sandbox", "172.30.0.1", "x", "pier-sandbox"
    )
    spec = SandboxSpec(image="x", limits=Limits(), labels={})
    placed, note = backend._on_fenced_network(spec)
    assert placed.network_name == "pier-sandbox"
    assert note == "services on this machine may answer the sandbox at 172.30.0.1: iptables is not installed"
    problem = Services(settings).say_isolation_problem("pier serve")
    assert problem and "iptables is not installed" in problem
    assert "pier serve: sandboxes may reach services on this machine" in caplog.text


def test_withdraw_takes_back_an_admitted_port_only(fake_iptables: Path):
    assert fence.admit("172.30.0.1", 41234) is None
    assert fence.admit("172.30.0.1", 41235) is None
    fence.withdraw("172.30.0.1", 41234)
    fence.withdraw("172.30.0.1", 41234)  # idempotent
    chain = tables(fake_iptables)["iptables"][fence.CHAIN]
    assert [rule for rule in chain if "--dport" in rule] == [
        owned("-d", "172.30.0.1", "-p", "tcp", "--dport", "41235", "-j", "ACCEPT")
    ]
    assert fence.admit("172.30.0.1", 41234) is None, "admitted again after a withdraw"
    assert len([rule for rule in tables(fake_iptables)["iptables"][fence.CHAIN] if "--dport" in rule]) == 2


def _admit_in_a_process(exit_hook: bool) -> str:
    """A pier process (a real one: its own pid and start time) that admits port
    41300 and then exits normally (its exit hook runs) or dies (os._exit: as when
    killed); its owner comment."""
    code = f"""
import os
from pathlib import Path
from pier.sandbox.docker import fence
fence._lock_path = lambda: Path({str(fence._lock_path())!r})
assert fence.admit("172.30.0.1", 41300) is None
print(fence._me(), flush=True)
if not {exit_hook}:
    os._exit(0)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def ports(state: Path) -> list[list[str]]:
    return [rule for rule in tables(state)["iptables"][fence.CHAIN] if "--dport" in rule]


def test_a_process_takes_its_ports_back_when_it_stops(fake_iptables: Path):
    _admit_in_a_process(exit_hook=True)
    assert ports(fake_iptables) == []


def test_ports_of_a_process_that_died_are_removed_at_the_next_start(fake_iptables: Path):
    dead = _admit_in_a_process(exit_hook=False)
    left = owned("-d", "172.30.0.1", "-p", "tcp", "--dport", "41300", "-j", "ACCEPT", owner=dead)
    assert ports(fake_iptables) == [left]
    # What the sweep must leave: a live process's rule (this one's), a rule of
    # another PID namespace (its owner cannot be looked up here), and a rule
    # without an owner (an older pier's) for a port something listens on. An
    # older pier's rule for a port nothing listens on goes.
    other_namespace = owned("-p", "tcp", "--dport", "41301", "-j", "ACCEPT", owner="1:1:1")
    listened = socket.create_server(("127.0.0.1", 0))
    legacy_live = ["-p", "tcp", "--dport", str(listened.getsockname()[1]), "-j", "ACCEPT"]
    legacy_gone = [
        "-d",
        "172.30.0.1",
        "-p",
        "tcp",
        "--dport",
        str(_a_port_nothing_listens_on()),
        "-j",
        "ACCEPT",
    ]
    data = tables(fake_iptables)
    data["iptables"][fence.CHAIN][:0] = [other_namespace, legacy_live, legacy_gone]
    fake_iptables.write_text(json.dumps(data))

    try:
        assert fence.admit("172.30.0.1", 41303) is None  # this process's first fence call: the next start
        mine = owned("-d", "172.30.0.1", "-p", "tcp", "--dport", "41303", "-j", "ACCEPT")
        assert sorted(ports(fake_iptables)) == sorted([mine, other_namespace, legacy_live])
        assert fence.sweep() == []  # the live ones stay
    finally:
        listened.close()


def _a_port_nothing_listens_on() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port not in fence._listening_ports()
    return port


def test_an_owner_is_gone_only_when_known_to_be():
    me = str(fence._me())
    namespace, pid, start = me.split(":")
    assert not fence.owner_gone(me)
    assert fence.owner_gone(f"{namespace}:{pid}:{int(start) + 1}")  # the same id, reused by another
    assert fence.owner_gone(f"{namespace}:999999999:1")  # no such process
    for unknown in (f"1:{pid}:1", "x:y:z", "", "1:2"):
        assert not fence.owner_gone(unknown)
