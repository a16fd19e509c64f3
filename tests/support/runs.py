"""Where a run's files are on this machine: `storage_path` is a storage key,
relative to the storage folder of the settings the tests run with."""

from __future__ import annotations

from pathlib import Path

from pier.record import Trajectory
from pier.settings import get_settings


def run_folder(record: Trajectory | dict) -> Path:
    key = record.storage_path if isinstance(record, Trajectory) else record["storage_path"]
    return get_settings().storage_root / key
