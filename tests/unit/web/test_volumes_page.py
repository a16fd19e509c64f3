"""A collection's volumes in the web UI (docs/sessions.md#volumes): its
settings page lists them and removes one as `DELETE /api/v1/volume/{c}/{name}`
does, through the same service (pier.server.services.volumes), never another
collection's; a run's page names the volumes its sandbox mounted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.db import Store
from pier.errors import VolumeInUse
from pier.lifecycle.volumes import engine_name, labels_of
from pier.record import RunStatus, Trajectory, VolumeRecord, utcnow
from pier.sandbox.base import Capabilities, VolumeInfo
from pier.settings import Settings, get_settings
from pier.web.session import csrf_token

ADMIN = "admin-token-for-volume-pages"


class EngineVolumes:
    """The engine's named volumes, as the Docker backend answers for them:
    listed by label, each with the sandboxes that mount it now (and where),
    one in use refused removal."""

    def __init__(self) -> None:
        self.volumes: dict[str, VolumeInfo] = {}

    def add(self, collection: str, name: str, mounted_at: tuple[str, ...] = ()) -> str:
        made = engine_name(collection, name)
        self.volumes[made] = VolumeInfo(
            made, labels_of(collection, name), "2026-12-01T10:00:00Z", len(mounted_at), mounted_at
        )
        return made

    def list_volumes(self, labels: Mapping[str, str]) -> list[VolumeInfo]:
        return [v for v in self.volumes.values() if all(v.labels.get(k) == x for k, x in labels.items())]

    def remove_volume(self, name: str) -> bool:
        found = self.volumes.get(name)
        if found is None:
            return False
        if found.in_use:
            raise VolumeInUse(
                f"volume {name} is in use by a sandbox (a run, or a kept sandbox): remove it when no sandbox mounts it"
            )
        del self.volumes[name]
        return True


@pytest.fixture
def engine() -> EngineVolumes:
    return EngineVolumes()


@pytest.fixture
def client(pier_home, monkeypatch, engine: EngineVolumes) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        backend = client.app.state.pier.services.backend  # type: ignore[attr-defined]
        monkeypatch.setattr(
            backend, "capabilities", Capabilities(memory_limit=True, disk_quota=True, volumes=True)
        )
        monkeypatch.setattr(backend, "list_volumes", engine.list_volumes)
        monkeypatch.setattr(backend, "remove_volume", engine.remove_volume)
        tokens = {}
        for name in ("team", "other"):
            made = client.post("/api/v1/collections", json={"name": name}, headers=bearer(ADMIN))
            assert made.status_code == 201, made.text
            tokens[name] = made.json()["token"]
        client.tokens = tokens  # type: ignore[attr-defined]
        client.cookies.set("pier_session", ADMIN)
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def signed_in(client: TestClient, token: str) -> str:
    """Sign the client's browser in with `token`; the CSRF field its forms carry."""
    client.cookies.set("pier_session", token)
    return csrf_token(token)


def volumes_section(page: str) -> str:
    assert 'id="volumes"' in page, "the settings page has no Volumes section"
    return page.split('<section id="volumes"')[1].split("</section>")[0]


def test_the_settings_page_lists_the_collections_volumes_and_never_another_collections(client, engine):
    engine.add("team", "cache", mounted_at=("/root/.cache",))
    engine.add("team", "datasets")
    theirs = engine.add("other", "private-set")
    same_name = engine.add("other", "cache")
    for token in (ADMIN, client.tokens["team"]):
        signed_in(client, token)
        got = client.get("/collections/team/settings")
        assert got.status_code == 200, got.text[:2000]
        section = volumes_section(got.text)
        assert "<code>cache</code>" in section and "<code>datasets</code>" in section
        assert engine_name("team", "cache") in section and "<code>/root/.cache</code>" in section
        assert "by 1 sandbox(es)" in section and "2026-12-01T10:00:00Z" in section
        assert 'action="/collections/team/volumes/datasets/remove"' in section
        assert "private-set" not in got.text and theirs not in got.text and same_name not in got.text, (
            "another collection's volume is on the page"
        )
    listed = client.get("/api/v1/volume/team", headers=bearer(client.tokens["team"])).json()
    assert sorted(v["name"] for v in listed["volumes"]) == ["cache", "datasets"], (
        "the page and the API differ"
    )
    signed_in(client, client.tokens["team"])
    refused = client.get("/collections/other/settings")
    assert refused.status_code == 403 and "private-set" not in refused.text


def test_the_page_removes_a_volume_refuses_one_in_use_and_never_reaches_another_collection(client, engine):
    kept = engine.add("team", "cache", mounted_at=("/root/.cache",))
    engine.add("team", "datasets")
    theirs = engine.add("other", "datasets")
    csrf = signed_in(client, client.tokens["team"])
    forged = client.post(
        "/collections/team/volumes/datasets/remove", data={"csrf": "x"}, follow_redirects=False
    )
    assert forged.status_code == 403 and engine_name("team", "datasets") in engine.volumes
    sent = client.post(
        "/collections/team/volumes/datasets/remove", data={"csrf": csrf}, follow_redirects=False
    )
    assert sent.status_code == 303, sent.text
    assert sent.headers["location"] == "/collections/team/settings#volumes"
    assert engine_name("team", "datasets") not in engine.volumes
    assert theirs in engine.volumes, (
        "removing the collection's volume removed another collection's of that name"
    )
    by_api = client.delete("/api/v1/volume/team/cache", headers=bearer(client.tokens["team"]))
    assert by_api.status_code == 409
    in_use = client.post("/collections/team/volumes/cache/remove", data={"csrf": csrf})
    assert in_use.status_code == 409 and kept in engine.volumes
    assert by_api.json()["detail"] in in_use.text, "the page does not say what the service said"
    assert "<code>cache</code>" in volumes_section(in_use.text)
    stranger = client.post("/collections/other/volumes/datasets/remove", data={"csrf": csrf})
    assert stranger.status_code == 403 and theirs in engine.volumes, "another collection's viewer removed it"
    none_here = client.post("/collections/team/volumes/datasets/remove", data={"csrf": csrf})
    assert none_here.status_code == 404 and theirs in engine.volumes
    gone = client.get("/api/v1/volume/team", headers=bearer(client.tokens["team"])).json()["volumes"]
    assert [v["name"] for v in gone] == ["cache"]
    entries = client.get("/api/v1/audit", headers=bearer(ADMIN),
                         params={"action": "/collections/{collection}/volumes/{name}/remove"}).json()  # fmt: skip
    removed = [e for e in entries if e["status"] == 303]
    assert [(e["target"]["collection"], e["target"]["name"]) for e in removed] == [("team", "datasets")]


def test_the_run_page_names_the_volumes_its_sandbox_mounted(client):
    record = Trajectory.new(uuid.uuid4().hex, "team", "t")
    record.finish(RunStatus.completed, utcnow(), 1.0)
    record.outputs.sandbox.volumes = [
        VolumeRecord(name="datasets", path="/data", read_only=True),
        VolumeRecord(name="cache", path="/root/.cache"),
    ]
    plain = Trajectory.new(uuid.uuid4().hex, "team", "t")
    plain.finish(RunStatus.completed, utcnow(), 1.0)
    with Store.open(Settings().db_url) as store:
        store.create_run(record)
        store.create_run(plain)
    page = client.get(f"/runs/{record.trajectory_id}").text
    assert '<dd id="volumes">' in page, "the run page names no volumes"
    shown = page.split('<dd id="volumes">')[1].split("</dd>")[0]
    assert "<code>datasets</code></a> at <code>/data</code> (read-only)" in shown
    assert "<code>cache</code></a> at <code>/root/.cache</code>" in shown and shown.count("read-only") == 1
    assert 'href="/collections/team/settings#volumes"' in shown
    assert '<dd id="volumes">' not in client.get(f"/runs/{plain.trajectory_id}").text


def test_the_settings_page_stays_up_when_the_engine_cannot_list_volumes(client, monkeypatch):
    from pier.errors import SandboxError

    def down(labels):
        raise SandboxError("listing volumes: the engine did not answer in time")

    monkeypatch.setattr(client.app.state.pier.services.backend, "list_volumes", down)
    got = client.get("/collections/team/settings")
    assert got.status_code == 200, got.text[:2000]
    assert "The volumes could not be listed: listing volumes: the engine did not answer" in volumes_section(
        got.text
    )
    assert 'id="environment"' in got.text and 'id="quotas"' in got.text
