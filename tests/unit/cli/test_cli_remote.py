"""`pier run --remote` without the fleet's settings: exit 2 before anything is
stored or submitted, naming each setting to set (the defaults, this host's
SQLite, key file and disk, would submit runs no other host's worker can read)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier import cli
from pier.cli.remote import missing_fleet_settings
from pier.settings import Settings

FLEET = {
    "PIER_EXECUTOR": "temporal",
    "PIER_TEMPORAL_ADDRESS": "temporal.internal:7233",
    "PIER_DATABASE_URL": "postgresql+psycopg://pier:pw@db/pier",
    "PIER_SECRET_KEY": "k" * 43 + "=",
    "PIER_STORAGE_URL": "s3://bucket/pier",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in FLEET:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_every_missing_fleet_setting_is_named(clean_env) -> None:
    missing = missing_fleet_settings(Settings())
    assert [m.split(" ")[0].split("=")[0] for m in missing] == list(FLEET)


def test_a_sqlite_database_is_no_fleet_database(clean_env) -> None:
    for name, value in FLEET.items():
        clean_env.setenv(name, value)
    assert missing_fleet_settings(Settings()) == []
    clean_env.setenv("PIER_DATABASE_URL", "sqlite:////tmp/pier.db")
    assert [m.split(" ")[0] for m in missing_fleet_settings(Settings())] == ["PIER_DATABASE_URL"]


def test_pier_run_remote_without_them_exits_2_saying_what_to_set(clean_env, tmp_path: Path) -> None:
    clean_env.setenv("PIER_EXECUTOR", "temporal")
    path = tmp_path / "RUNBOOK.md"
    path.write_text("---\nagent: script\n---\n```bash\ntrue\n```\n")
    result = CliRunner().invoke(cli.app, ["run", str(path), "--remote"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert "pier run --remote submits the run to a fleet" in result.output
    for name in ("PIER_TEMPORAL_ADDRESS", "PIER_DATABASE_URL", "PIER_SECRET_KEY", "PIER_STORAGE_URL"):
        assert name in result.output
    named = " ".join(result.output.split()).split("; set ", 1)[1]
    assert "PIER_EXECUTOR" not in named, "only what is missing is named"
