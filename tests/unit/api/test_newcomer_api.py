"""The API as a newcomer meets it, over HTTP on a real SQLite store (no Docker):
routine bodies in the common spellings, routine ids never reused, a JSON body
sent without its Content-Type told what to send, /docs and /redoc offline."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings

ADMIN = "admin-" + "n" * 40
RUNBOOK = "---\nagent: script\nsnapshot: ''\n---\n```bash\necho hi > {{results_dir}}/x\n```\n"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path / "home",
        database_url=None,
        docker_host=f"unix://{tmp_path / 'no-engine.sock'}",
        sweep_interval_sec=3600,
        admin_token=ADMIN,
    )
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        assert c.post("/api/v1/collections", json={"name": "team"}).status_code in (200, 201)
        put = c.put("/api/v1/tasks/team/hello", json={"workflow": RUNBOOK})
        assert put.status_code in (200, 201), put.text
        yield c


@pytest.mark.parametrize(
    "body",
    [
        {"name": "r", "cron": "0 3 * * *", "timezone": "Europe/Berlin"},
        {"name": "r", "cron_expression": "0 3 * * *", "tz": "Europe/Berlin", "params": {}},
        {"name": "r", "schedule": "0 3 * * *", "time_zone": "Europe/Berlin", "active": True},
    ],
)
def test_a_routine_body_in_any_common_spelling_is_accepted(client, body):
    made = client.post("/api/v1/routines/team/hello", json=body)
    assert made.status_code == 201, made.text
    assert made.json()["cron_expression"] == "0 3 * * *" and made.json()["timezone"] == "Europe/Berlin"
    changed = client.patch("/api/v1/routines/team/hello/r", json={"cron": "@hourly", "tz": "UTC"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["cron_expression"] == "@hourly" and changed.json()["timezone"] == "UTC"


def test_two_spellings_of_one_field_are_refused_naming_both(client):
    sent = client.post(
        "/api/v1/routines/team/hello", json={"name": "r", "cron": "@daily", "cron_expression": "@daily"}
    )
    assert sent.status_code == 422
    assert "cron_expression and cron are the same field: send only one of them" in sent.json()["detail"]


def test_a_new_routine_never_gets_a_deleted_ones_id(client):
    first = client.post("/api/v1/routines/team/hello", json={"name": "a", "cron": "@daily"}).json()
    assert client.delete("/api/v1/routines/team/hello/a").status_code in (200, 204)
    second = client.post("/api/v1/routines/team/hello", json={"name": "b", "cron": "@daily"}).json()
    assert second["id"] != first["id"]
    runs = client.get("/api/v1/routines/team/hello/b/runs")
    assert runs.status_code == 200 and runs.json()["trajectories"] == []


@pytest.mark.parametrize(
    "path", ["/api/v1/run/team/hello", "/api/v1/routines/team/hello", "/api/v1/collections"]
)
def test_json_sent_without_its_content_type_is_told_what_to_send(client, path):
    # What `curl -d '{...}'` sends: the JSON, labelled as a form.
    sent = client.post(
        path,
        content=b'{"init_params": {"vars": {}}, "name": "x"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert sent.status_code in (415, 422), sent.text
    assert "Content-Type: application/json" in sent.json()["detail"], sent.text
    assert "Extra inputs" not in sent.json()["detail"]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_nothing_from_another_host(client, page):
    html = client.get(page)
    assert html.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
    assert assets, html.text
    for url in assets:
        assert url.startswith("/"), f"{page} loads {url} from another host"
        served = client.get(url)
        assert served.status_code == 200 and len(served.content) > 1000, url
    assert "cdn" not in html.text.lower() and "googleapis" not in html.text


def test_a_run_with_several_problems_is_refused_naming_each(client):
    sent = client.post(
        "/api/v1/run/team/hello", json={"init_params": {"vars": {"nme": "x"}, "primary_outputs": ["../x"]}}
    )
    assert sent.status_code == 422, sent.text
    fields = {e["field"] for e in sent.json()["errors"]}
    assert {"vars", "primary_outputs"} <= fields, sent.json()


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolve(spec: dict, ref: str) -> object:
    """A local JSON pointer (RFC 6901) in the spec; KeyError when it points nowhere."""
    assert ref.startswith("#/"), f"{ref}: not a local reference (a viewer offline cannot follow it)"
    node: object = spec
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]  # type: ignore[index]
    return node


def test_every_ref_in_the_openapi_schema_resolves(client):
    """ReDoc stops at the first pointer into nothing ('Invalid reference token: $defs')."""
    spec = client.get("/openapi.json").json()
    refs = sorted(set(_refs(spec)))
    assert len(refs) > 20, refs  # the schema does use references
    dangling = []
    for ref in refs:
        try:
            _resolve(spec, ref)
        except (KeyError, IndexError, ValueError, TypeError):
            dangling.append(ref)
    assert not dangling, f"references that point nowhere: {dangling}"
