"""The warm pool on Docker: a run claims a ready container (hit) and deletes it,
the pool replaces it, and a pool whose process is killed leaves containers
that a sweep removes, idle and claimed alike."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pier.lifecycle.pool import LABEL_POOL
from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.sweeper import sweep
from pier.settings import Settings, WarmPoolEntry
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration
READY_S = 120


def settings_for(tmp_path: Path, image: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        warm_pool=[WarmPoolEntry(image=image, size=1, cpus=1, memory="512M")],
        warm_pool_check_sec=3600,
    )


def runbook(image: str) -> str:
    return textwrap.dedent(f"""\
        ---
        agent: script
        snapshot: ""
        image: {image}
        cpus: 1
        memory: 512M
        ---
        ```bash
        echo "first line"
        ls -A /app > {{{{results_dir}}}}/app.txt
        ```
        """)


def pooled(backend: DockerBackend, owner: str | None = None) -> list[str]:
    return [
        i.id
        for i in backend.list_sandboxes()
        if LABEL_POOL in i.labels and (owner is None or i.labels.get("pier.owner") == owner)
    ]


def test_a_run_claims_a_ready_container_and_the_pool_replaces_it(tmp_path, docker_backend, base_image):
    settings = settings_for(tmp_path, base_image)
    services = Services(settings)
    pool = services.start_pool()
    assert pool is not None
    try:
        assert pool.wait_ready(READY_S), "the pool never filled"
        ready = set(pooled(docker_backend))
        task = task_from_runbook(parse(runbook(base_image)))
        record = run(services, RunRequest(collection="tests", task_name="pool", task=task))
        assert record.status == RunStatus.completed, record.error
        assert record.outputs.sandbox is not None and record.outputs.sandbox.pool == "hit"
        assert record.outputs.sandbox.id in ready
        # Pristine: /app held nothing but what set up put there (assets, results, checks).
        folder = services.storage.run_dir("tests", "pool", record.trajectory_id)
        listing = (folder / "results" / "app.txt").read_text().split()
        assert sorted(listing) == ["assets", "checks", "results"], listing
        assert pool.wait_ready(READY_S), "no replacement was made"
        assert record.outputs.sandbox.id not in pooled(docker_backend), "the claimed container was kept"
    finally:
        pool.close()
    assert not [i for i in pooled(docker_backend) if i in ready]


class OneOwner:
    """The engine as the sweep sees it, narrowed to one process's sandboxes: the
    engine is shared, and a test sweeps only what it made."""

    def __init__(self, backend: DockerBackend, owner: str):
        self.backend, self.owner = backend, owner

    def list_sandboxes(self):
        return [i for i in self.backend.list_sandboxes() if i.labels.get("pier.owner") == self.owner]

    def remove(self, sandbox_id: str) -> None:
        self.backend.remove(sandbox_id)


POOL_PROCESS = """
import sys, time
from pier.lifecycle.pool import WarmPool
from pier.sandbox.base import SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings, WarmPoolEntry
from pier.sandbox.owner import owner_label
settings = Settings(warm_pool=[WarmPoolEntry(image=sys.argv[1], size=1, cpus=1, memory="512M")],
                    warm_pool_check_sec=3600)
pool = WarmPool(DockerBackend(settings), settings).start()
assert pool.wait_ready(120)
key = next(iter(pool._wanted))
claimed = pool.claim(SandboxSpec(image=key.image, limits=key.limits, labels={}))
pool.refill()
assert claimed is not None and pool.wait_ready(120)
print(owner_label(), flush=True)
time.sleep(600)
"""


def test_a_killed_pool_process_leaves_containers_a_sweep_removes(tmp_path, docker_backend, base_image):
    env = {**os.environ, "PIER_HOME": str(tmp_path / "home")}
    with subprocess.Popen(
        [sys.executable, "-c", POOL_PROCESS, base_image], stdout=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        owner = proc.stdout.readline().strip()
        try:
            assert owner, "the pool process did not get ready"
            assert len(pooled(docker_backend, owner)) == 2  # one claimed, one idle
            assert sweep(OneOwner(docker_backend, owner), lambda trajectory_id: None) == [], "its owner lives"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    swept = sweep(OneOwner(docker_backend, owner), lambda trajectory_id: None)
    assert len(swept) == 2 and not pooled(docker_backend, owner), json.dumps([s.reason for s in swept])
