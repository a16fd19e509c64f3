"""The run page says a run's state as the record's one derivation does
(pier.record.run_state): a pre-flight failure is "not started", checks that
did not run are "skipped (why)", a runbook without checks has "no checks"."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.lifecycle.wiring import Services
from pier.record import RunStatus, StageStatus
from pier.settings import Settings, get_settings
from tests.unit.test_run_state import ended, preflight_failed

ADMIN = "admin-token-for-states"


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        client.cookies.set("pier_session", ADMIN)
        yield client


def shown(client: TestClient, record) -> str:
    Services().store.create_run(record)
    page = client.get(f"/runs/{record.trajectory_id}")
    assert page.status_code == 200, page.text
    return html.unescape(page.text)


def test_a_preflight_failure_reads_not_started_and_its_checks_skipped(client):
    text = shown(client, preflight_failed())
    assert "Not started (pre-flight failed at setup):" in text
    assert "Checks skipped (the run failed at setup)." in text
    assert "The runbook has no checks" not in text and "finished with nothing" not in text
    api = client.get("/api/v1/runs", headers={"Authorization": f"Bearer {ADMIN}"}).json()["trajectories"][0]
    assert api["state"]["summary"].startswith("not started (pre-flight failed: setup:")  # the same words


def test_a_runbook_without_checks_reads_no_checks(client):
    done = StageStatus.completed
    record = ended({n: done for n in ("prepare", "create", "setup", "run_agent", "collect", "check", "save")},
                   status=RunStatus.completed)  # fmt: skip
    assert "No checks." in shown(client, record)


def test_usage_is_a_table_of_tokens_and_cost_by_provider_and_model(client):
    done = StageStatus.completed
    record = ended({n: done for n in ("prepare", "run_agent", "check")}, status=RunStatus.completed)
    record.run.inputs |= {"model_provider": "anthropic", "model": "claude-sonnet-4-5"}
    record.outputs.usage = {"prompt_tokens": 12345, "completion_tokens": 678, "total_tokens": 13023,
                            "cost_usd": 0.0421, "api_calls": 3, "duration_seconds": 9.5,
                            "gateway": {"requests": 3, "api_calls": 3, "prompt_tokens": 12000,
                                        "completion_tokens": 670, "total_tokens": 12670, "cost_usd": 0.04}}  # fmt: skip
    text = shown(client, record)
    table = text[
        text.index('<table class="usage"') : text.index("</table>", text.index('<table class="usage"'))
    ]
    assert "{'" not in text[text.index('id="usage-h"') :].split("</section>")[0]  # never a raw dict
    rows = [row for row in table.split("<tr>")[2:]]
    assert len(rows) == 2
    for row, cells in zip(rows, (["agent's report", "anthropic", "claude-sonnet-4-5", "12,345", "678", "$0.0421", "3"],
                                 ["pier's gateway", "anthropic", "claude-sonnet-4-5", "12,000", "670", "$0.0400", "3"]),
                          strict=True):  # fmt: skip
        found = [c.split(">", 1)[1].split("<", 1)[0].strip() for c in row.split("<td")[1:]]
        assert found == cells, (found, row)
    assert "duration_seconds" in text  # what else was reported, by name
