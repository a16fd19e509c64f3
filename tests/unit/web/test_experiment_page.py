"""The experiment page's live part rendered from real results (records ended as
an experiment's runs end, through pier.experiments.results): rows labelled by
their input values, pass@k for every k, the failing check's message, and the
cost a cell spent without a success. On main: `row 0/1`, pass@k for the largest
k only, an empty error for failed checks, and "no cost recorded"."""

from __future__ import annotations

from types import SimpleNamespace

from pier.db import StoredAttempt
from pier.experiments.results import results
from pier.experiments.spec import ExperimentSpec, cells
from pier.record import CheckResult, RunStatus, Trajectory, utcnow
from pier.web.experiments import failure, live_context
from pier.web.render import templates

SPEC = ExperimentSpec.model_validate({
    "name": "e", "task": "t", "attempts": 3,
    "matrix": {"vars": [{"city": "Paris"}, {"city": "Lima"}]},
})  # fmt: skip


def ended(tid: str, passed: bool, cost: float) -> Trajectory:
    record = Trajectory.new(tid, "c", "t")
    record.outputs.checks = [
        CheckResult(
            name="answer", type="file_contains", passed=passed, output="expected 'forty-two' in answer.md"
        )
    ]
    record.outputs.usage = {"cost_usd": cost, "total_tokens": 10, "source": "gateway"}
    record.finish(RunStatus.completed, utcnow(), 2.0)
    record.outcome = "success" if passed else "checks_failed"
    return record


def test_the_live_part_names_inputs_every_pass_at_k_failed_checks_and_cost_without_success() -> None:
    found = cells(SPEC)
    attempts, records = [], {}
    for seq in range(6):
        cell, attempt = found[seq % 2], seq // 2
        tid = f"{seq:032x}"
        attempts.append(StoredAttempt(id=seq, experiment_id="x", seq=seq, cell=cell.index, attempt=attempt,
                                      retry=0, trajectory_id=tid, state="done", outcome=None,
                                      created_at=utcnow()))  # fmt: skip
        records[tid] = ended(tid, passed=cell.row == 0, cost=0.041)
    figures = results(found, attempts, records, SPEC.attempts)
    experiment = SimpleNamespace(id="x", spec=SPEC, stored=SimpleNamespace(status="completed", reason=None,
                                                                          collection="c"))  # fmt: skip
    context = live_context(experiment, {**figures, "attempts_started": 6, "runs_total": 6})
    html = templates.get_template("_experiment_live.html").render(context)

    assert "city=Paris" in html and "city=Lima" in html and "row 0" not in html
    assert all(f"pass@{k} " in html for k in (1, 2, 3))
    assert "$0.1230 spent, no success" in html  # the Lima cell spent 3 x $0.041 and never passed
    assert "no cost recorded" not in html
    assert "check answer failed: expected &#39;forty-two&#39; in answer.md" in html
    assert "checks_failed" in html


def test_a_failed_runs_error_column_names_its_failing_check() -> None:
    assert failure(ended("a" * 32, passed=False, cost=0.01)).startswith("check answer failed: expected")
    assert failure(ended("b" * 32, passed=True, cost=0.01)) == ""
