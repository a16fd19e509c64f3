"""One name per thing: a run's workflow id is derived from its trajectory id in one place."""

from pier.names import trajectory_id_of, workflow_id
from pier.record import Trajectory


def test_a_workflow_id_is_derived_from_the_trajectory_id_and_read_back():
    run = Trajectory.new("abc123", "team-a", "report-v2")
    assert run.workflow_id == workflow_id("team-a", "report-v2", "abc123") == "team-a-report-v2--abc123"
    assert trajectory_id_of(run.workflow_id) == trajectory_id_of("abc123") == "abc123"
