"""The host fence's rules, against a stand-in iptables on PATH that keeps its
tables in a file (the real one needs root and would change this machine): every
rule matches one of pier's bridges or sits in pier's own chain, nothing is
added twice however many processes put the fence up at once, and a missing
binary is said, never skipped in silence."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import sys
from pathlib import Path

import pytest

from pier.sandbox import fence

FAKE = r'''#!PYTHON
"""iptables/ip6tables stand-in: -w N, then -nL, -N, -C, -I chain 1, -A, -D."""
import fcntl, json, os, sys
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
    monkeypatch.setattr(fence, "_lock_path", lambda: tmp_path / "fence.lock")
    fence._forward_hook.cache_clear()
    return state


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
        ["-d", "172.30.0.1", "-p", "tcp", "--dport", "5000", "-j", "ACCEPT"],
        ["-d", "172.30.0.1", "-p", "tcp", "--dport", "41234", "-j", "ACCEPT"],
    ])  # fmt: skip
    if Path("/proc/net/if_inet6").exists():
        assert v6["INPUT"] == [["-i", "pier-sandbox", "-j", "REJECT"]]
        assert v6["FORWARD"] == [["-i", "pier-sandbox", "-o", "pier-sandbox", "-j", "REJECT"]]


def _fence_in_a_process(state: str, lock: str, interface: str) -> None:
    os.environ["FAKE_IPTABLES_STATE"] = state
    fence._done.clear()
    fence._lock_path = lambda: Path(lock)  # type: ignore[assignment]
    assert fence.fence_bridge(interface, [("172.30.0.1", 5000)]) is None


def test_concurrent_processes_add_each_rule_once(fake_iptables: Path, tmp_path: Path):
    context = multiprocessing.get_context("fork")
    procs = [
        context.Process(
            target=_fence_in_a_process, args=(str(fake_iptables), str(tmp_path / "fence.lock"), name)
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
    assert len(v4[fence.CHAIN]) == 3  # one accept, replies, the reject


def test_without_the_binary_the_reason_is_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(fence, "_done", set())
    assert fence.fence_bridge("pier-sandbox") == "iptables is not installed"
    assert fence.admit("172.30.0.1", 1) == "iptables is not installed"
    assert fence.fence_problem() == "iptables is not installed"


def test_the_docker_backend_says_it_as_a_sandbox_note_and_at_start(tmp_path, monkeypatch, caplog):
    from pier.lifecycle.service import Services
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
        ["-d", "172.30.0.1", "-p", "tcp", "--dport", "41235", "-j", "ACCEPT"]
    ]
    assert fence.admit("172.30.0.1", 41234) is None, "admitted again after a withdraw"
    assert len([rule for rule in tables(fake_iptables)["iptables"][fence.CHAIN] if "--dport" in rule]) == 2
