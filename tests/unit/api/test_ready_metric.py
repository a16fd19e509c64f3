"""`pier_ready{service}` says what /health/ready says, so an alert can page
when a service the server needs stops answering."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from pier.api.app import create_app
from pier.settings import Settings, get_settings

ADMIN = "admin-token-for-ready"


def ready_samples(client: TestClient) -> dict[str, float]:
    text = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
    return {
        sample.labels["service"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "pier_ready"
        for sample in family.samples
    }


def test_pier_ready_follows_the_readiness_probes(pier_home, monkeypatch):
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings())) as client:
        assert client.get("/health/ready").status_code == 200
        assert ready_samples(client) == {"database": 1.0, "storage": 1.0, "engine": 1.0}
        state = client.app.state.pier
        broken = lambda: (_ for _ in ()).throw(OSError("disk gone"))  # noqa: E731
        monkeypatch.setattr(state.services.storage, "check", broken)
        assert client.get("/health/ready").status_code == 503
        assert ready_samples(client)["storage"] == 0.0
    assert not ready_samples_after_stop()


def ready_samples_after_stop() -> list:
    from pier.telemetry import metrics

    return [s for f in metrics.REGISTRY.collect() if f.name == "pier_ready" for s in f.samples]
