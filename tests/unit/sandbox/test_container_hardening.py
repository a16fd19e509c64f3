"""The hardened default sandbox: what plan_container asks of the engine."""

from __future__ import annotations

import pytest

from pier.errors import SandboxError
from pier.sandbox.base import Limits, SandboxSpec
from pier.sandbox.docker.client import EngineFacts, engine_facts
from pier.sandbox.docker.containers import plan_container
from pier.sandbox.docker.hardening import KEEP_CAPS, Hardening, hardening

FACTS = EngineFacts(ncpu=2, storage_driver="overlay2", backing_fs="extfs", runtimes=("runc", "runsc"))
SPEC = SandboxSpec(image="img", limits=Limits(), labels={})


def test_a_sandbox_drops_every_capability_but_the_few_apt_needs():
    host = plan_container(SPEC, FACTS, owner="o").host
    assert host["cap_drop"] == ["ALL"]
    assert set(host["cap_add"]) == {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                                    "NET_BIND_SERVICE", "SETGID", "SETUID"}  # fmt: skip
    assert not {"NET_RAW", "MKNOD", "SETFCAP", "SETPCAP", "SYS_CHROOT", "AUDIT_WRITE"} & set(host["cap_add"])
    assert host["security_opt"] == ["no-new-privileges:true"]
    assert host["ipc_mode"] == "private"
    assert "runtime" not in host  # the engine's default
    assert not any("seccomp" in opt for opt in host["security_opt"])  # the default profile stays
    assert host["pids_limit"] == Limits().pids and "binds" not in host  # no host paths at all


def test_the_knobs_add_capabilities_and_drop_no_new_privileges():
    made = hardening(["net_raw", "CAP_SYS_PTRACE", "CHOWN"], False, None, FACTS.runtimes)
    assert made.cap_add == (*KEEP_CAPS, "NET_RAW", "SYS_PTRACE")
    host = plan_container(SPEC, FACTS, owner="o", hardening=made).host
    assert "security_opt" not in host and "NET_RAW" in host["cap_add"]


def test_a_named_runtime_is_used_when_the_engine_has_it_and_refused_when_not():
    assert hardening([], True, "runsc", ("runc", "runsc")).runtime == "runsc"
    assert (
        plan_container(SPEC, FACTS, owner="o", hardening=Hardening(runtime="runsc")).host["runtime"]
        == "runsc"
    )
    with pytest.raises(
        SandboxError, match=r"PIER_SANDBOX_RUNTIME=kata .*it has: runc.*PIER_SANDBOX_RUNTIME=auto"
    ):
        hardening([], True, "kata", ("runc",))


def test_auto_takes_the_strongest_runtime_present_else_the_default():
    assert hardening([], True, "auto", ("runc", "sysbox-runc", "runsc")).runtime == "runsc"
    assert hardening([], True, "auto", ("runc", "sysbox-runc")).runtime == "sysbox-runc"
    assert hardening([], True, "auto", ("runc",)).runtime is None


def test_engine_facts_list_the_registered_runtimes():
    info = {"NCPU": 2, "Driver": "overlay2", "Runtimes": {"runc": {"path": "runc"}, "runsc": {"path": "/x"}}}
    assert engine_facts(info).runtimes == ("runc", "runsc")
    assert engine_facts({"NCPU": 1}).runtimes == ()


def test_auto_is_the_default_and_runc_is_an_explicit_choice(monkeypatch):
    from pier.settings import Settings

    monkeypatch.delenv("PIER_SANDBOX_RUNTIME", raising=False)
    assert Settings().sandbox_runtime == "auto"
    default = Settings().sandbox_runtime
    assert hardening([], True, default, ("runc", "runsc")).runtime == "runsc"
    assert hardening([], True, "runc", ("runc", "runsc")).runtime == "runc"
    assert hardening([], True, "runc", ()).runtime == "runc"  # an engine that lists none has runc


def test_the_start_line_names_the_runtime_and_why():
    from pier.sandbox.docker.hardening import runtime_reason

    assert runtime_reason("auto", "runsc", "runc", ("runc", "runsc")) == (
        "sandboxes run under runsc (PIER_SANDBOX_RUNTIME=auto: the strongest runtime the engine has)"
    )
    plain = runtime_reason("auto", None, "runc", ("runc",))
    assert plain.startswith("sandboxes run under runc, the engine's default (PIER_SANDBOX_RUNTIME=auto")
    assert "it has: runc" in plain and "docs/runtime.md" in plain
    assert runtime_reason("runc", "runc", "runc", ("runc", "runsc")) == (
        "sandboxes run under runc (PIER_SANDBOX_RUNTIME=runc)"
    )
    assert "the engine's default" in runtime_reason(None, None, "runc", ())


def test_engine_facts_name_the_default_runtime():
    assert engine_facts({"NCPU": 1, "DefaultRuntime": "runsc"}).default_runtime == "runsc"
    assert engine_facts({"NCPU": 1}).default_runtime == "runc"
