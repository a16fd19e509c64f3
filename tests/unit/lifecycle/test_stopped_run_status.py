"""A run the server stops (a shutdown the drain did not wait out) ends
failed in its trace and its metrics, as its stored record says, not
cancelled in one and failed in the other."""

from __future__ import annotations

import threading
import time

from pier.lifecycle.runner import cancel, execute
from pier.lifecycle.start import RunRequest, Services, new_context
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.fake import FakeBackend, FakeEngine, Script, replied
from pier.settings import Settings
from pier.tasks import task_from_runbook
from tests.unit.lifecycle.test_run_on_fake import RUNBOOK
from tests.unit.test_telemetry import spans, value  # noqa: F401 - fixture

STOPPED = "the server stopped on SIGTERM (a shutdown) before the run ended"


def test_a_stopped_run_ends_failed_in_trace_metrics_and_record(tmp_path, monkeypatch, spans):  # noqa: F811
    monkeypatch.setattr("pier.sandbox._registered", {})
    engine = FakeEngine()

    def slow_agent(sandbox, _call):
        while True:
            sandbox._alive()  # deleted: the command ends, as in a container
            time.sleep(0.05)
        return replied("")

    register_backend(
        "fake-stop", lambda s: FakeBackend(s, engine=engine, program=Script().on(r"script\.sh", slow_agent))
    )
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-stop")
    request = RunRequest(collection="tests", task_name="t", task=task_from_runbook(parse(RUNBOOK)))
    ctx = new_context(Services(settings), request, None)
    failed_before = value("pier_runs_ended_total", status="failed")
    done: list = []
    runner = threading.Thread(target=lambda: done.append(execute(ctx)))
    runner.start()
    deadline = time.monotonic() + 30
    while ctx.stage != "run_agent" and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.stopped_as = STOPPED
    cancel(ctx)
    runner.join(30)
    (record,) = done
    assert record.status == RunStatus.failed and record.error == STOPPED
    assert value("pier_runs_ended_total", status="failed") == failed_before + 1
    root = next(s for s in spans.get_finished_spans() if s.name.startswith("run "))
    assert root.attributes["pier.status"] == "failed"
