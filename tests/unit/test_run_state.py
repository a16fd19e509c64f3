"""A run's state in words, derived once from the record (pier.record.run_state)
and said alike by the web UI, `pier run`'s summary and the API's `state`."""

from __future__ import annotations

import io

from rich.console import Console

from pier.cli import summary as cli_summary
from pier.record import CheckResult, RunStatus, StageStatus, Trajectory

RUNBOOK = "---\nagent: script\n---\n```bash\ntrue\n```\n"


def ended(statuses: dict[str, StageStatus], *, checks: list | None = None, error: tuple[str, str] | None = None,
          status: RunStatus = RunStatus.failed) -> Trajectory:  # fmt: skip
    record = Trajectory.new(
        "c" * 32, "local", "t", init_params={"instruction": RUNBOOK, "checks": checks or []}
    )
    for name, value in statuses.items():
        record.stage(name).status = value
    if error:
        record.fail(*error)
    record.finish(status, record.created, 1.0)
    return record


def preflight_failed() -> Trajectory:
    """setup refused the image (no python3); collect still ran and found nothing."""
    done, skipped = StageStatus.completed, StageStatus.skipped
    record = ended(
        {"prepare": done, "create": done, "setup": StageStatus.failed, "run_agent": skipped,
         "cleanup_credentials": done, "collect": StageStatus.failed, "check": skipped, "save": done},
        checks=[{"name": "out", "kind": "file_exists"}],
        error=("setup", "the image x has no python3 (which the checks need): add python3 to the image"),
    )  # fmt: skip
    record.stage("collect").detail = "the agent finished with nothing in /app/results"
    return record


def summary_text(monkeypatch, tmp_path, record: Trajectory) -> str:
    screen = io.StringIO()
    monkeypatch.setattr(cli_summary, "out", Console(file=screen, width=300, color_system=None))
    cli_summary.show_summary(record, str(tmp_path))
    return screen.getvalue()


def test_a_preflight_failure_says_not_started_never_that_the_agent_finished(monkeypatch, tmp_path):
    record = preflight_failed()
    state = record.state
    assert state.summary.startswith("not started (pre-flight failed: setup: the image x has no python3")
    assert not state.agent_started
    shown = {s.name: s for s in state.stages}
    assert shown["run_agent"].status == "skipped" and "not started" in (shown["run_agent"].detail or "")
    assert "finished" not in (shown["collect"].detail or "") and "not started" in (
        shown["collect"].detail or ""
    )
    text = summary_text(monkeypatch, tmp_path, record)
    assert "not started (pre-flight failed: setup:" in text and "finished with nothing" not in text, text
    assert record.model_dump(mode="json")["state"]["summary"] == state.summary  # the API's and --json's
    assert "state" not in record.stored()  # derived, never stored


def test_skipped_checks_say_skipped_and_why_never_that_there_are_none(monkeypatch, tmp_path):
    record = preflight_failed()
    assert record.state.checks == "checks skipped (the run failed at setup)"
    assert "checks skipped (the run failed at setup)" in summary_text(monkeypatch, tmp_path, record)


def test_a_runbook_without_checks_says_no_checks(monkeypatch, tmp_path):
    done = StageStatus.completed
    record = ended({name: done for name in ("prepare", "create", "setup", "run_agent", "collect", "check")},
                   status=RunStatus.completed)  # fmt: skip
    assert record.state.checks == "no checks" and record.state.summary == "completed"
    assert "no checks" in summary_text(monkeypatch, tmp_path, record)


def test_checks_that_ran_are_counted():
    done = StageStatus.completed
    record = ended({"run_agent": done, "check": done}, checks=[{"name": "a"}], status=RunStatus.completed)
    record.outputs.checks = [CheckResult(name="a", type="file", passed=True),
                             CheckResult(name="b", type="file", passed=False)]  # fmt: skip
    record.finish(RunStatus.completed, record.created, 1.0)
    assert record.state.checks == "1/2 checks passed (1 failed)"
    assert record.state.summary == "completed; 1/2 checks passed (1 failed)"
    record.outputs.checks.append(CheckResult(name="c", type="file", passed=True, status="skipped"))
    assert (
        record.state.checks == "1/3 checks passed (1 failed, 1 skipped)"
    )  # a skipped one never counts as passed


def test_additive_fields_and_unknown_stages_leave_the_state_alone():
    record = preflight_failed()
    data = record.model_dump(mode="json")
    data["steps"]["run"]["outputs"]["runner"] = {"kind": "new"}  # a field another change adds
    data["steps"]["run"]["outputs"]["stages"].append({"name": "evaluate", "status": "pending"})
    again = Trajectory.model_validate(data)
    assert again.state.summary == record.state.summary and again.state.checks == record.state.checks


def test_a_workflow_step_named_run_is_not_read_as_a_runbook_run():
    """A workflow may name a step "run" (Task accepts it); its outputs are its
    activity's, with no stages or checks: the state is a workflow's, as for
    any other name, and the record serialises (state is a computed field)."""

    def workflow(step: str) -> Trajectory:
        return Trajectory.model_validate({
            "name": "t", "collection": "local", "trajectory_id": "c" * 32, "status": "completed",
            "steps": {step: {"activity": "text_template", "status": "completed", "outputs": {"text": "hi"}}},
        })  # fmt: skip

    named_run, other = workflow("run"), workflow("render")
    assert named_run.is_workflow
    assert named_run.state == other.state
    assert named_run.model_dump(mode="json")["state"] == other.model_dump(mode="json")["state"]
