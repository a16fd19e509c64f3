"""A run whose database gave out (its retry budget spent) fails saying the
database did not answer, or that its disk is full: an outage in an operator's
words, not "internal error ... OperationalError ... sqlalche.me"."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

from pier.db.retry import outage_message
from pier.lifecycle import runner
from pier.record import RunStatus
from pier.sandbox.fake import FakeEngine, Script
from tests.unit.lifecycle.test_run_on_fake import start, write_results


def gave_out(message: str):
    def stage(_ctx) -> None:
        raise OperationalError("UPDATE runs SET ...", {}, sqlite3.OperationalError(message))

    return stage


@pytest.mark.parametrize(
    ("driver_says", "we_say"),
    [("unable to open database file", "the database did not answer"),
     ("database or disk is full", "the database's disk is full")],
)  # fmt: skip
def test_a_stage_whose_database_gave_out_fails_worded_as_an_outage(
    tmp_path, monkeypatch, driver_says, we_say
):
    stages = tuple((name, gave_out(driver_says) if name == "check" else s) for name, s in runner.STAGES)
    monkeypatch.setattr(runner, "STAGES", stages)
    monkeypatch.setattr("pier.sandbox._registered", {})
    record = start(tmp_path, FakeEngine(), Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.failed and record.failed_stage == "check"
    assert record.error.startswith(we_say), record.error
    assert driver_says in record.error
    assert "sqlalche.me" not in record.error and "internal error" not in record.error


def test_other_errors_are_no_outage():
    assert outage_message(ValueError("bad")) is None
