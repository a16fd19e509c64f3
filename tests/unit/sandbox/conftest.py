from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pier.settings import Settings


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings in a fresh home, with no CA bundle unless one is given."""

    def make(**overrides: object) -> Settings:
        values: dict[str, object] = {"home": tmp_path / "home", "ca_bundle": None}
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def write_snapshots(settings: Settings) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        settings.snapshots_file.parent.mkdir(parents=True, exist_ok=True)
        settings.snapshots_file.write_text(text)
        return settings.snapshots_file

    return write
