"""Agent layers on a real engine: the first run of an agent on an image builds an
image FROM it with the pinned CLI (once, however many runs start together), every
later run uses it and installs nothing, it holds nothing of the run that built it,
and another pin (or script) builds another layer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from tests.support.runs import run_folder

from pier.agents import get_agent
from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN, LayerRecipe, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

RUNBOOK = """---
agent: codex
model: gpt-5.1-codex
snapshot: ""
---
# Answer

What is six times seven? Write the answer to {{results_dir}}/answer.md.
"""


@pytest.fixture
def own_image(docker_backend: DockerBackend, base_image: str) -> Iterator[str]:
    """An image of its own (base_image plus a label), so that no layer exists for
    it yet, whatever other tests built on base_image; removed with its layers."""
    tag = f"pier-test/layer-base:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base_image}\nLABEL pier.test.layer-base={tag.rsplit(':', 1)[1]}\n"
    subprocess.run(["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, text=True, check=True,
                   capture_output=True)  # fmt: skip
    yield tag
    for layer in docker_backend.list_layers():
        if layer.base == tag:
            docker_backend.remove_layer(layer.image)
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def start(image: str, env: dict[str, str]):
    request = RunRequest(collection="layers", task_name="answer", task=task_from_runbook(parse(RUNBOOK)),
                         run_params={"snapshot": "", "image": image}, env=env)  # fmt: skip
    record = run(Services(get_settings()), request)
    log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    return record, log


def in_sandbox(backend: DockerBackend, image: str, command: str) -> str:
    spec = SandboxSpec(image=image, limits=Limits(cpus=1, memory="1G", disk=None),
                       labels={LABEL_RUN: f"layer-probe-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    sandbox = backend.create(spec)
    try:
        return sandbox.exec(command, workdir="/", timeout=300).output
    finally:
        sandbox.delete()


def test_the_first_run_installs_in_its_sandbox_and_builds_the_layer_off_its_path_the_second_uses_it(
    docker_backend, own_image, model_server
):
    key = f"sk-pier-layer-{uuid.uuid4().hex}"
    env = {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": model_server.url + "/v1"}

    first, first_log = start(own_image, env)
    assert first.success, first.error
    assert first.outputs.sandbox.image == own_image  # it did not wait for a layer
    said = [line for line in first_log if line.startswith("agent layer:")]
    assert said[0].startswith("agent layer: not built yet (codex 0.171.0, pier-agent/codex:"), said
    assert re.fullmatch(r"agent layer: building in the background; installed in the sandbox in [0-9.]+ s",
                        said[1]), said  # fmt: skip
    assert "pier: codex 0.171.0 installed" in first_log  # the install's own lines reach the run log
    assert (run_folder(first) / "results" / "answer.md").is_file()

    # The runs' PIER_HOME (the build's lock) is this test's, not the session backend's.
    recipe = get_agent("codex").layer()
    assert DockerBackend(get_settings()).wait_for_layer_build(own_image, recipe, 900), "the build failed"

    second, second_log = start(own_image, env)
    assert second.success, second.error
    layer = second.outputs.sandbox.image
    assert layer.startswith("pier-agent/codex:") and layer != own_image
    assert [line for line in second_log if line.startswith("agent layer:")] == [
        f"agent layer: cached (codex 0.171.0, {layer})"
    ]
    assert not [line for line in second_log if line.startswith("pier: ")], "the second run installed again"

    # Built FROM the image, not committed from a sandbox: nothing the first run
    # wrote or was given is in it.
    leftovers = in_sandbox(docker_backend, layer, (
        "ls -d /app/results/answer.md /run/pier /logs/agent /root/.codex/sessions 2>/dev/null; "
        rf"grep -rlsF -e {key} -e {first.trajectory_id} / --exclude-dir=proc --exclude-dir=sys "
        "--exclude-dir=dev 2>/dev/null; true"
    ))  # fmt: skip
    assert leftovers.strip() == ""
    assert "0.171.0" in in_sandbox(docker_backend, layer, "codex --version")


BUILD = """
import json, sys
from pier.sandbox.base import LayerRecipe
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings
recipe = LayerRecipe(**json.loads(sys.argv[2]))
layer = DockerBackend(Settings()).ensure_layer(sys.argv[1], recipe, lambda line: None, 300)
print(json.dumps({"image": layer.image, "built": layer.built_s is not None}))
"""


def build_in_processes(image: str, recipe: LayerRecipe, count: int) -> list[dict]:
    """ensure_layer in `count` pier processes started together (one PIER_HOME)."""
    given = json.dumps({"name": recipe.name, "version": recipe.version, "script": recipe.script})
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, image, given], stdout=subprocess.PIPE, text=True,
                              env=os.environ.copy()) for _ in range(count)]  # fmt: skip
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def test_concurrent_first_builds_build_once_and_a_pin_change_builds_a_new_layer(docker_backend, own_image):
    # The sleep keeps the first build going while the others arrive.
    recipe = LayerRecipe("pier-test-layer", "1.0", "sleep 3; echo 1.0 > /opt/pier-layer-version\n")
    results = build_in_processes(own_image, recipe, 3)
    assert len({r["image"] for r in results}) == 1
    assert [r["built"] for r in results].count(True) == 1, results
    first = results[0]["image"]
    assert in_sandbox(docker_backend, first, "cat /opt/pier-layer-version").strip() == "1.0"

    pinned = LayerRecipe("pier-test-layer", "1.1", "echo 1.1 > /opt/pier-layer-version\n")
    again = docker_backend.ensure_layer(own_image, pinned, lambda line: None, 300)
    assert again.image != first and again.built_s is not None
    assert in_sandbox(docker_backend, again.image, "cat /opt/pier-layer-version").strip() == "1.1"
    assert docker_backend.ensure_layer(own_image, pinned, lambda line: None, 300).built_s is None

    listed = {
        (layer.image, layer.version) for layer in docker_backend.list_layers() if layer.base == own_image
    }
    assert listed == {(first, "1.0"), (again.image, "1.1")}


def test_a_layer_in_use_is_kept_by_remove_and_an_unused_one_goes(docker_backend, own_image):
    recipe = LayerRecipe("pier-test-layer", "2.0", "true\n")
    layer = docker_backend.ensure_layer(own_image, recipe, lambda line: None, 300).image
    spec = SandboxSpec(image=layer, limits=Limits(cpus=1, memory="1G", disk=None),
                       labels={LABEL_RUN: f"layer-use-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    sandbox = docker_backend.create(spec)
    try:
        assert docker_backend.remove_layer(layer) is False
        assert docker_backend.image_exists(layer)
    finally:
        sandbox.delete()
    assert docker_backend.remove_layer(layer) is True
    assert not docker_backend.image_exists(layer)


START = """
import json, sys
from pier.sandbox.base import LayerRecipe
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings
recipe = LayerRecipe(**json.loads(sys.argv[2]))
print(json.dumps(DockerBackend(Settings()).start_layer_build(sys.argv[1], recipe, 300)))
"""


def test_a_background_build_outlives_its_starter_stays_single_and_a_run_meanwhile_does_not_wait(
    docker_backend, own_image
):
    backend = DockerBackend(get_settings())  # this test's PIER_HOME, as the starter's
    # The sleep keeps the build going while the others ask.
    recipe = LayerRecipe("pier-test-layer", "3.0", "sleep 4; echo 3.0 > /opt/pier-layer-version\n")
    given = json.dumps({"name": recipe.name, "version": recipe.version, "script": recipe.script})
    # Started by a process that exits at once (as a one-shot `pier run` does).
    starter = subprocess.run([sys.executable, "-c", START, own_image, given], capture_output=True, text=True,
                             timeout=120, env=os.environ.copy())  # fmt: skip
    assert starter.returncode == 0 and starter.stdout.strip() == "true", starter.stderr

    # Under way: no second build, and a run arriving now finds no layer at once.
    assert backend.start_layer_build(own_image, recipe, 300) is False
    meanwhile = backend.ensure_layer(own_image, recipe, lambda line: None, 300, wait=False)
    assert meanwhile.ready is False and meanwhile.built_s is None
    # A run that must wait (no open network) waits for that build and builds nothing.
    assert build_in_processes(own_image, recipe, 1) == [{"image": meanwhile.image, "built": False}]

    assert backend.wait_for_layer_build(own_image, recipe, 300) is True
    found = backend.ensure_layer(own_image, recipe, lambda line: None, 300, wait=False)
    assert found.ready and found.image == meanwhile.image
    assert in_sandbox(docker_backend, found.image, "cat /opt/pier-layer-version").strip() == "3.0"
    assert backend.start_layer_build(own_image, recipe, 300) is False  # it exists: nothing to do
    built = [layer for layer in docker_backend.list_layers() if layer.base == own_image]
    assert [(layer.image, layer.version) for layer in built] == [(found.image, "3.0")]
    # Holds nothing of the build: neither the script nor the CA bundle handed to it.
    assert (
        in_sandbox(docker_backend, found.image, "ls /tmp/pier-layer.sh /tmp/pier-ca.crt 2>&1; true").count(
            "No such file"
        )
        == 2
    )


def test_a_failed_background_build_is_not_started_again_by_every_run(docker_backend, own_image):
    """A layer whose install fails (a registry down, a pin that does not exist)
    was built again, and failed again, after every run that installed the CLI
    in its sandbox: the engine built a failing install once per run. After a
    failure the build waits FAILED_BUILD_RETRY_SEC; start_layer_build says why."""
    from pier.errors import ImageError
    from pier.sandbox.docker import layers

    backend = DockerBackend(get_settings())
    recipe = LayerRecipe("pier-test-layer", "9.9", "echo 'no such version' >&2; exit 3\n")
    assert backend.start_layer_build(own_image, recipe, 300) is True
    assert backend.wait_for_layer_build(own_image, recipe, 300) is False  # it failed
    with pytest.raises(ImageError, match=r"the last build of .* failed \d+ s ago .*tried again in \d+ s"):
        backend.start_layer_build(own_image, recipe, 300)
    # Once the wait is over it is tried again.
    tag = backend.ensure_layer(own_image, recipe, lambda line: None, 300, wait=False).image
    marker = layers.failed_build_path(get_settings().layers_dir, tag)
    past = marker.stat().st_mtime - layers.FAILED_BUILD_RETRY_SEC - 1
    os.utime(marker, (past, past))
    assert backend.start_layer_build(own_image, recipe, 300) is True
    assert backend.wait_for_layer_build(own_image, recipe, 300) is False
    assert marker.stat().st_mtime > past, "the second failure starts a new wait"
