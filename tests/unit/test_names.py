"""One name per thing: a run's workflow id is derived from its trajectory id in one place."""

from pier.names import trajectory_id_of, workflow_id
from pier.record import Trajectory


def test_a_workflow_id_is_derived_from_the_trajectory_id_and_read_back():
    run = Trajectory.new("abc123", "team-a", "report-v2")
    assert run.workflow_id == workflow_id("team-a", "report-v2", "abc123") == "team-a-report-v2--abc123"
    assert trajectory_id_of(run.workflow_id) == trajectory_id_of("abc123") == "abc123"


def test_a_task_name_must_fit_a_file_name_in_bytes():
    """128 combining characters are 128 characters but 256+ bytes: a folder of
    that name cannot be made (ingest answered 500, ENAMETOOLONG)."""
    import pytest

    from pier.errors import InputError
    from pier.names import check_task_name

    assert check_task_name("é" * 127) == "é" * 127  # 254 bytes
    with pytest.raises(InputError, match="bytes long in UTF-8"):
        check_task_name("o" + "\u20d2" * 100)
