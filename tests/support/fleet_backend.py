"""A sandbox backend for fleet tests that need no Docker: the fake backend
(scripted), whose agent writes a result, after PIER_TEST_AGENT_SEC seconds
when that is set (a run to kill or cancel mid-agent), and copies the attached
files it was given (/app/assets) to results as asset-<name>. Named to `pier worker`
as PIER_SANDBOX_BACKEND=tests.support.fleet_backend:backend."""

from __future__ import annotations

import os
import time

from pier.sandbox.fake import FakeBackend, Script
from pier.settings import Settings


def _agent(sandbox, call) -> None:
    seconds = float(os.environ.get("PIER_TEST_AGENT_SEC") or 0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sandbox._alive()  # deleted (cancelled): the command ends, as in a container
        time.sleep(0.1)
    sandbox.put_files("/app/results", {"out.txt": b"done\n"})
    assets = sandbox.host_path("/app/assets")  # attached files, copied back as results
    copies = (
        {f"asset-{f.name}": f.read_bytes() for f in assets.iterdir() if f.is_file()}
        if assets.is_dir()
        else {}
    )
    if copies:
        sandbox.put_files("/app/results", copies)


class SlowBackend(FakeBackend):
    """Making a sandbox takes PIER_TEST_CREATE_SEC (a worker to lose before its agent starts)."""

    def create(self, spec):
        time.sleep(float(os.environ.get("PIER_TEST_CREATE_SEC") or 0))
        return super().create(spec)


def backend(settings: Settings) -> FakeBackend:
    return SlowBackend(settings, program=Script().on(r"script\.sh", _agent))
