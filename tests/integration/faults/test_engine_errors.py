"""Runs on a Docker engine that fails for a moment: a proxy in front of the
engine's socket (tests/support/engine_proxy.py) answers 503 or 500 to the first
requests of a kind, resets the connection, or passes a create on and loses
its answer. The run completes, each try again in its log, with one container
and its agent run once; an engine that keeps failing fails the run with the
engine's own words once the budget is spent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.engine_proxy import EngineProxy, Fault

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

CREATE = r"^POST /v[\d.]+/containers/create"
START = r"^POST /v[\d.]+/containers/[0-9a-f]+/start"
EXEC_CREATE = r"^POST /v[\d.]+/containers/[0-9a-f]+/exec"
EXEC_START = r"^POST /v[\d.]+/exec/[0-9a-f]+/start"
ARCHIVE_READ = r"^GET /v[\d.]+/containers/[0-9a-f]+/archive"
ARCHIVE_WRITE = r"^PUT /v[\d.]+/containers/[0-9a-f]+/archive"
ATTACH = r"^POST /v[\d.]+/containers/[0-9a-f]+/attach"


@pytest.fixture
def proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_backend) -> Iterator[EngineProxy]:
    engine = EngineProxy(tmp_path / "engine.sock").start()
    monkeypatch.setenv("PIER_DOCKER_HOST", engine.url)
    get_settings.cache_clear()
    try:
        yield engine
    finally:
        engine.stop()
        get_settings.cache_clear()


def start(base_image: str, script: str, **more: object) -> tuple[Trajectory, list[str]]:
    front = {"agent": "script", "snapshot": "", "image": base_image, **more}
    text = "---\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in front.items())
    text += f"\n---\n# engine faults\n\n```bash\n{script}\n```\n"
    services = Services(get_settings())
    request = RunRequest(
        collection="tests", task_name="t", task=task_from_runbook(parse(text)), run_params={}
    )
    record = run(services, request)
    return record, [e.line for e in services.store.events(record.trajectory_id)]


def left_of(docker_backend, trajectory_id: str) -> list:
    return [s for s in docker_backend.list_sandboxes() if s.labels.get(LABEL_RUN) == trajectory_id]


def test_a_run_rides_out_transient_engine_errors(proxy: EngineProxy, base_image: str, docker_backend) -> None:
    proxy.faults = [
        Fault(CREATE, "lose", 1),  # the engine makes the container; its answer never comes
        Fault(START, "503", 1),
        Fault(EXEC_CREATE, "reset", 1),
        Fault(EXEC_START, "503", 2),
        Fault(ARCHIVE_READ, "500", 1),
        # Set-up's files go in through the keep-alive's stdin (an attach); refused,
        # they go the engine's way, an archive streamed from a file, which fails once.
        Fault(ATTACH, "503", 1),
        Fault(ARCHIVE_WRITE, "500", 1),
    ]
    # Without tar in the sandbox collect reads the three folders by the engine's
    # archives (with tar it reads them by one exec, whose faults are those above).
    script = (
        'echo ran >> /app/results/agent-runs.txt; cat /app/results/agent-runs.txt; rm -f "$(command -v tar)"'
    )
    record, lines = start(base_image, script)
    assert record.status.value == "completed", (record.error, lines[-20:])
    for fault in proxy.faults:
        assert fault.failed == fault.times, f"{fault.pattern}: the test meant nothing ({fault})"
    tries = [line for line in lines if line.startswith("engine: ") and "trying again" in line]
    assert len(tries) == 1 + 1 + 1 + 2 + 1 + 1, "\n".join(lines)  # the refused attach is no try: a way round
    assert any("made by a try whose answer was lost: taking it" in line for line in lines), lines
    assert proxy.count(CREATE) == 2, "the lost create was tried once more"
    assert not left_of(docker_backend, record.trajectory_id), "a second container was made, or one was left"
    assert sum(1 for line in lines if line == "ran") == 1, f"the agent ran more than once: {lines}"


def test_the_check_sandboxs_copy_in_rides_out_a_transient_engine_error(
    proxy: EngineProxy, base_image: str, docker_backend
) -> None:
    """checks_isolation fresh copies the results into a second sandbox: that
    archive is sent again after a 500, as set-up's is (it was a generator,
    spent by the first try, so the check stage failed on one engine blip)."""
    checks = [{"name": "answer", "type": "file_exists", "path": "answer.txt"}]
    proxy.faults = [Fault(ARCHIVE_WRITE + r"\?path=%2Fapp%2Fresults$", "500", 1)]  # the check sandbox's
    record, lines = start(
        base_image, "echo 42 > /app/results/answer.txt", checks=checks, checks_isolation="fresh"
    )
    assert proxy.faults[0].failed == 1, f"the test meant nothing: {proxy.requests}"
    assert record.status.value == "completed", (record.error, lines[-20:])
    assert [(c.name, c.passed) for c in record.outputs.checks] == [("answer", True)], lines[-20:]
    assert any("checks run in a second sandbox" in line for line in lines), lines
    assert sum("trying again" in line for line in lines if line.startswith("engine: ")) == 1, lines
    assert not left_of(docker_backend, record.trajectory_id)


def test_an_engine_that_keeps_failing_fails_the_run_with_its_own_words(
    proxy: EngineProxy, base_image: str, docker_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIER_ENGINE_RETRY_SEC", "2")
    get_settings.cache_clear()
    reason = "devmapper: Thin Pool has 0 free data blocks (injected by the test)"
    proxy.faults = [Fault(CREATE, "500", 1000, message=reason)]
    record, lines = start(base_image, "echo never")
    assert record.status.value == "failed", lines
    assert record.error is not None and reason in record.error, record.error
    assert record.failed_stage == "create"
    assert any("giving up" in line and reason in line for line in lines), lines
    assert not left_of(docker_backend, record.trajectory_id)


def test_an_engine_refusal_that_is_no_moment_fails_at_once(
    proxy: EngineProxy, base_image: str, docker_backend
) -> None:
    proxy.faults = [Fault(CREATE, "400", 1000, message="invalid reference format (injected)")]
    record, lines = start(base_image, "echo never")
    assert record.status.value == "failed" and "invalid reference format" in (record.error or "")
    assert not any(line.startswith("engine: ") for line in lines), "a 400 is not tried again"
