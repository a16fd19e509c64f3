"""A run of a collection whose sandbox is kept, with that sandbox standing in
the fake engine (scripted: it can be paused), for the API's and the pages'
tests of what a kept sandbox's owner may do with it."""

from __future__ import annotations

import time
import uuid

from pier.db import Store
from pier.record import RunStatus, Trajectory, utcnow
from pier.sandbox.base import Limits, SandboxSource, SandboxSpec
from pier.sandbox.fake import FakeBackend, FakeSandbox
from pier.settings import Settings

IMAGE = "pier-test-kept:1"


def kept_run(collection: str, *, kept: bool = True) -> tuple[Trajectory, FakeSandbox]:
    """A completed run of `collection` (in the settings' database) whose
    sandbox, a fresh fake one, is kept for ten minutes (or was not kept)."""
    backend = FakeBackend(Settings())  # the process's one fake engine, which the app's backend shares
    backend.ensure_image(SandboxSource(kind="image", name=IMAGE, image=IMAGE), lambda _: None, 10)
    sandbox = backend.create(SandboxSpec(image=IMAGE, limits=Limits(disk=None), labels={}))
    record = Trajectory.new(uuid.uuid4().hex, collection, "t")
    record.finish(RunStatus.completed, utcnow(), 1.0)
    record.outputs.sandbox.id = sandbox.id
    record.outputs.sandbox.image = IMAGE
    if kept:
        record.outputs.sandbox.kept_until = time.time() + 600
    with Store.open(Settings().db_url) as store:
        store.create_run(record)
    return record, sandbox
