"""One limits rule at the API: a run's init_params lower the task's limit and
never raise it, and every limit, the task's as much as the run's, is held to the
operator's maximum, refused with a 422 naming the field."""

from __future__ import annotations

import pytest
from tests.support.api_server import Collection, runbook

pytestmark = pytest.mark.integration


def test_init_params_lower_the_runbooks_time_limit(collection: Collection):
    """The reproduction: with `timeout_sec: 60` in the runbook, `init_params:
    {timeout_sec: 3}` was ignored and the run took as long as its script."""
    collection.put_task("slow", "sleep 30\necho late > {{results_dir}}/x", timeout_sec=60)
    tid = collection.run("slow", init_params={"timeout_sec": 3})
    record = collection.wait("slow", tid, timeout=120)
    assert record["status"] == "failed", record
    assert record["duration_seconds"] < 25, record["duration_seconds"]
    assert "3" in (record.get("error") or ""), record.get("error")


def test_init_params_may_not_raise_the_runbooks_limit(collection: Collection):
    collection.put_task("capped", "echo hi > {{results_dir}}/x", timeout_sec=60)
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/capped", json={"init_params": {"timeout_sec": 120}})
    assert r.status_code == 422, r.text
    assert "timeout_sec" in r.text and "more than the task allows" in r.text


@pytest.mark.parametrize(
    ("front", "setting"),
    [({"timeout_sec": 99999}, "PIER_MAX_TIMEOUT_SEC"), ({"cpus": 1000}, "PIER_MAX_CPUS")],
)
def test_a_task_above_the_operators_maximum_is_refused_when_stored(collection: Collection, front, setting):
    with collection.client() as c:
        r = c.put(f"/api/v1/tasks/{collection.name}/big", content=runbook("echo hi", **front),
                  headers={"Content-Type": "text/markdown"})  # fmt: skip
    assert r.status_code == 422, r.text
    assert next(iter(front)) in r.text and setting in r.text, r.text
