"""network.allow from frontmatter, init_params and the operator's default, and
what the container plan makes of an internal network."""

from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import parse
from pier.sandbox.base import Limits, SandboxSpec
from pier.sandbox.docker.client import EngineFacts
from pier.sandbox.docker.containers import plan_container
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook

FACTS = EngineFacts(ncpu=2, storage_driver="overlay2", backing_fs="extfs")


def plan_of(front: str, run: dict | None = None, **settings):
    step = resolve(task_from_runbook(parse(f"---\nagent: script\n{front}\n---\nDo it.\n")), run)
    return build_plan(step, RunInputs("run-1", "c", "t", {}), Settings(**settings))


def test_no_list_anywhere_leaves_egress_as_it_is():
    assert plan_of("").network_allow is None


def test_lists_from_frontmatter_run_and_operator_add_up():
    assert plan_of("network: {allow: [pypi.org]}").network_allow == ("pypi.org",)
    assert plan_of("network: {allow: []}").network_allow == ()
    run = {"network": {"allow": ["*.npmjs.org"]}}
    assert plan_of("network: {allow: [pypi.org]}", run).network_allow == ("*.npmjs.org",)  # run replaces
    both = plan_of("network: {allow: [pypi.org]}", network_allow="deb.debian.org, pypi.org")
    assert both.network_allow == ("deb.debian.org", "pypi.org")
    assert plan_of("", network_allow="deb.debian.org").network_allow == ("deb.debian.org",)


def test_bad_entries_and_keys_are_named_before_any_sandbox():
    with pytest.raises(InputError, match=r"network\.allow: 'http://x' has no valid port"):
        plan_of('network: {allow: ["http://x"]}')
    with pytest.raises(InputError, match=r"network\.deny: Extra inputs"):
        plan_of("network: {deny: [x.org]}")


def test_an_internal_network_replaces_the_default_one_but_not_no_network():
    spec = SandboxSpec(image="i", limits=Limits(), labels={}, network_name="pier-egress", dns=("172.19.0.1",))
    host = plan_container(spec, FACTS, owner="o").host
    assert host["network_mode"] == "pier-egress" and host["dns"] == ["172.19.0.1"]
    off = SandboxSpec(image="i", limits=Limits(network=False), labels={}, network_name="pier-egress")
    assert plan_container(off, FACTS, owner="o").host["network_mode"] == "none"
