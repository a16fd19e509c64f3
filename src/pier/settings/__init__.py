"""Every PIER_* setting (pydantic-settings), one module per concern:

- files.py: state (the database, outputs, scratch) and how private it is
- sandbox.py: images, the engine and runtime, isolation, the warm pool
- runs.py: what one run may ask for and bring
- network.py: the model gateway, the egress allow-list, the outbound policy
- server.py: `pier serve` (tokens, slots, limits before routes, quotas, webhooks)
- fleet.py: the Temporal fleet and riding out faults
- observability.py: metrics, traces, the audit log

`Settings` is all of them at once, read from `PIER_<NAME>` variables (and a
`.env` file); `GROUPS` lists them for the generated reference
(docs/settings-reference.md, scripts/settings_reference.py)."""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict

from pier.settings.files import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    PRIVATE_UMASK,
    StateSettings,
    make_private_dir,
)
from pier.settings.fleet import FleetSettings
from pier.settings.network import NetworkSettings
from pier.settings.observability import ObservabilitySettings
from pier.settings.runs import RunSettings
from pier.settings.sandbox import DEFAULT_SNAPSHOT, SandboxSettings, WarmPoolEntry, detect_host_ca_bundle
from pier.settings.server import ServerSettings

__all__ = [
    "DEFAULT_SNAPSHOT",
    "GROUPS",
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "PRIVATE_UMASK",
    "Settings",
    "WarmPoolEntry",
    "detect_host_ca_bundle",
    "get_settings",
    "make_private_dir",
]

GROUPS = (
    StateSettings,
    SandboxSettings,
    RunSettings,
    NetworkSettings,
    ServerSettings,
    FleetSettings,
    ObservabilitySettings,
)


class Settings(
    StateSettings,
    SandboxSettings,
    RunSettings,
    NetworkSettings,
    ServerSettings,
    FleetSettings,
    ObservabilitySettings,
    BaseSettings,
):
    # A `.env` file in the working folder holds settings for every shell (an
    # `export` lasts for one); the environment wins over it.
    model_config = SettingsConfigDict(env_prefix="PIER_", extra="ignore", env_file=".env")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
