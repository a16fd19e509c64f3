"""A run's disk limit holds on this engine's storage driver (overlay2 on ext4 has
no quotas): a sandbox writing far past it, in several places, is stopped, its
run fails naming the limit, and the host's free space never drops by more than
the limit + 10 %. On runc and on runsc."""

from __future__ import annotations

import os
import threading

import pytest

from pier.lifecycle.start import RunRequest, Services, run
from pier.limits import parse_size
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox.docker.diskguard import Spares
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

LIMIT = "1G"
# 3 GB in all, 1 GB in each of three places; a failed write does not stop the script.
WRITER = "\n".join(
    f"dd if=/dev/zero of={folder}/fill bs=1M count=1000 status=none || echo refused in {folder}"
    for folder in ("/tmp", "/app", "/var")
)
RUNBOOK = f"---\nagent: script\nsnapshot: ''\n---\n# fill the disk\n\n```bash\n{WRITER}\nsleep 30\n```\n"


class FreeSpace:
    """The least free space seen on a filesystem, sampled while it runs."""

    def __init__(self, path: str):
        self.path = path
        self.before = self.least = self.free()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def free(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            self.least = min(self.least, self.free())

    def __enter__(self) -> FreeSpace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@pytest.mark.parametrize("spares", [0, 2], ids=["formatted-per-sandbox", "spare-disk"])
def test_a_sandbox_writing_past_its_disk_limit_is_stopped_and_the_host_keeps_its_space(
    base_image, on_runtime, monkeypatch, spares
):
    """With spares, the sandbox's disk is one formatted ahead of time (a spare is
    taken), and the limit holds the same."""
    monkeypatch.setenv("PIER_DISK_LIMIT", LIMIT)
    monkeypatch.setenv("PIER_BASE_IMAGE", base_image)
    monkeypatch.setenv("PIER_DISK_GUARD_SPARES", str(spares))
    get_settings.cache_clear()
    settings = get_settings()
    settings.disk_guard_root.mkdir(parents=True, exist_ok=True)
    ready = Spares(settings.disk_guard_root, spares)
    ready.fill(parse_size(LIMIT))
    made = sorted(ready.folder.glob("*.ext4")) if spares else []
    assert len(made) == spares
    request = RunRequest(collection="tests", task_name="disk", task=task_from_runbook(parse(RUNBOOK)))
    with FreeSpace(str(settings.disk_guard_root)) as space:
        record = run(Services(settings), request)
    assert record.status == RunStatus.failed, record.error
    assert record.error is not None and f"disk limit of {LIMIT}" in record.error, record.error
    assert record.failed_stage == "run_agent"
    dropped = space.before - space.least
    assert dropped < parse_size(LIMIT) * 1.1, f"the host lost {dropped / 1e9:.2f} GB under a {LIMIT} limit"
    assert list(settings.disk_guard_root.glob("*.ext4")) == [], "the sandbox's disk file was left behind"
    if spares:
        assert not made[0].exists() and made[1].exists(), "the sandbox did not take a spare disk"
