"""`pier routine ...` on the store of the test's own PIER_HOME: the same checks
as the API (bad fields exit 2 naming them), and each command's effect stored."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.lifecycle.start import Services

runner = CliRunner()
TASK = {"init_params": {"instruction": "say hi", "agent": "script"}}


@pytest.fixture
def store():
    store = Services().store
    store.create_collection("c")
    store.put_task("c", "t", TASK)
    yield store
    store.close()


def pier(*args: str):
    return runner.invoke(app, ["routine", *args])


def test_create_list_pause_resume_run_now_delete(store):
    created = pier("create", "c", "t", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
                   "--var", "topic=rust", "--init-params", json.dumps({"vars": {"n": "1"}}))  # fmt: skip
    assert created.exit_code == 0, created.output
    routine = store.get_routine("c", "t", "nightly")
    assert routine.init_params == {"vars": {"n": "1", "topic": "rust"}}
    assert routine.enabled and routine.next_run_at is not None and routine.next_run_at.hour in (1, 2)

    listed = pier("list", "--collection", "c")
    assert listed.exit_code == 0 and "c/t/nightly" in listed.output and "active" in listed.output

    assert pier("pause", "c", "t", "nightly").exit_code == 0
    paused = store.get_routine("c", "t", "nightly")
    assert not paused.enabled and paused.next_run_at is None
    assert "paused" in pier("list").output

    assert pier("run-now", "c", "t", "nightly").exit_code == 0
    assert store.get_routine("c", "t", "nightly").run_now_at is not None

    assert pier("resume", "c", "t", "nightly").exit_code == 0
    assert store.get_routine("c", "t", "nightly").next_run_at is not None

    assert pier("delete", "c", "t", "nightly").exit_code == 0
    assert store.list_routines("c") == []
    gone = pier("delete", "c", "t", "nightly")
    assert gone.exit_code == 1 and "not found" in gone.output


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "0 3 * *"], "cron_expression"),
        (["--cron", "0 3 * * *", "--timezone", "Mars/Olympus"], "timezone"),
        (["--cron", "0 3 * * *", "--init-params", "[1]"], "--init-params"),
    ],
)
def test_bad_input_exits_2_naming_the_field(store, args, field):
    result = pier("create", "c", "t", "r", *args)
    assert result.exit_code == 2
    assert field in result.output
    assert store.list_routines() == []


def test_an_unknown_task_exits_2(store):
    result = pier("create", "c", "missing", "r", "--cron", "@daily")
    assert result.exit_code == 2 and "task: 'missing' is not a task" in result.output
