"""The frontmatter's `volumes:` (docs/sessions.md#volumes): bad names and paths
refused with an error naming the key and what to do, before any sandbox; the
plan carries good ones; a backend without volumes refuses a spec with one."""

from __future__ import annotations

import pytest

from pier.errors import CapabilityError, InputError, RunbookError
from pier.lifecycle.volumes import engine_name
from pier.runbook import parse
from pier.sandbox.base import Limits, SandboxSpec, VolumeMount
from pier.sandbox.capabilities import refuse_unsupported
from pier.sandbox.fake import FakeBackend


def front(volumes: str) -> str:
    return f"---\nagent: script\nvolumes: {volumes}\n---\n# t\n\n```bash\ntrue\n```\n"


def test_the_issues_example_parses():
    declared = parse(front("{datasets: {path: /data, read_only: true}, cache: {path: /root/.cache}}"))
    volumes = declared.frontmatter.volumes
    assert {name: (v.path, v.read_only) for name, v in volumes.items()} == {
        "datasets": ("/data", True),
        "cache": ("/root/.cache", False),
    }
    assert not declared.warnings, "volumes is a known key"


@pytest.mark.parametrize(
    ("volumes", "says"),
    [
        ('{"../up": {path: /data}}', "volume name '../up' is not allowed"),
        ("{Data: {path: /data}}", "volume name 'Data' is not allowed"),
        ('{"a/b": {path: /data}}', "volume name 'a/b' is not allowed"),
        ("{d: {path: data}}", "must be absolute"),
        ("{d: {path: /data/../etc}}", "is not normal: no '..'"),
        ("{d: {path: /data/./x}}", "is not normal"),
        ("{d: {path: //data}}", "is not normal"),
        ("{d: {path: /data/}}", "is not normal"),
        ("{d: {path: /app/results}}", "would mount over /app/results"),
        ("{d: {path: /app/results/cache}}", "would mount over /app/results"),
        ("{d: {path: /app}}", "would mount over /app/results"),
        ("{d: {path: /}}", "would mount over"),
        ("{d: {path: /logs/agent}}", "would mount over /logs"),
        ("{d: {path: /run/pier}}", "would mount over /run/pier"),
        ("{d: {path: /run}}", "would mount over /run/pier"),
        ("{d: {path: /app/assets/x}}", "would mount over /app/assets"),
        ("{d: {path: /app/checks}}", "would mount over /app/checks"),
        ("{d: {path: /proc/self}}", "is under /proc"),
        ("{d: {path: /usr}}", "would hide the system's /usr"),
        ("{d: {path: '/da:ta'}}", "a mount cannot take"),
        ("{d: {path: /data, mode: rw}}", "volumes.d.mode"),
        ("{d: {path: /data, read_only: maybe}}", "volumes.d.read_only"),
        ("{d: {}}", "volumes.d.path"),
        ("{a: {path: /data}, b: {path: /data/sub}}", "overlap"),
        ("[/data]", "volumes must be a mapping"),
    ],
)
def test_bad_names_and_paths_are_refused_naming_the_key(volumes, says):
    with pytest.raises(RunbookError) as refused:
        parse(front(volumes))
    assert says in str(refused.value)
    assert "frontmatter key 'volumes" in str(refused.value)


def test_the_plan_carries_them_and_refuses_them_with_continue_from(tmp_path):
    from pier.lifecycle.plan import RunInputs, plan_run
    from pier.settings import Settings
    from pier.tasks import task_from_runbook

    task = task_from_runbook(parse(front("{datasets: {path: /data, read_only: true}}")))
    settings = Settings(home=tmp_path / "home", ca_bundle=None)
    inputs = RunInputs(trajectory_id="a" * 32, collection="c", task="t")
    assert plan_run(task, {}, inputs, settings)[1].volumes == (("datasets", "/data", True),)
    with pytest.raises(InputError, match="continue_from with `volumes:` is not supported"):
        plan_run(task, {"continue_from": "b" * 32}, inputs, settings)


def test_two_collections_never_share_an_engine_volume():
    assert engine_name("team-a", "cache") != engine_name("team-b", "cache")
    assert engine_name("team-a", "cache") == engine_name("team-a", "cache")
    assert engine_name("a-b", "c") != engine_name("a", "b-c"), "a name that runs into the collection's"


def test_a_backend_without_volumes_refuses_a_spec_that_mounts_one():
    spec = SandboxSpec(image="x", limits=Limits(disk=None), labels={},
                       volumes=(VolumeMount("pier-vol-x-cache", "/data"),))  # fmt: skip
    backend = FakeBackend()
    with pytest.raises(CapabilityError, match="mounts volumes"):
        refuse_unsupported(spec, backend.capabilities, backend.name)
    refuse_unsupported(
        SandboxSpec(image="x", limits=Limits(disk=None), labels={}), backend.capabilities, "fake"
    )


def test_a_run_that_would_pass_the_collections_volume_count_is_refused():
    from pier.lifecycle.volumes import labels_of, run_mounts
    from pier.sandbox.base import VolumeInfo

    class Engine(FakeBackend):
        def list_volumes(self, labels):
            assert labels == labels_of("c")
            return [VolumeInfo(engine_name("c", "old"), labels_of("c", "old"))]

    engine = Engine()
    assert len(run_mounts(engine, "c", (("old", "/old", False),), limit=1)) == 1, "an existing one is no more"
    with pytest.raises(
        InputError, match=r"has 1 volume\(s\) and this run would make 1 more, past PIER_VOLUMES_PER"
    ):
        run_mounts(engine, "c", (("new", "/new", False),), limit=1)
    mounts = run_mounts(engine, "c", (("new", "/new", True),), limit=2)
    assert mounts == (VolumeMount(engine_name("c", "new"), "/new", True, labels_of("c", "new")),)
