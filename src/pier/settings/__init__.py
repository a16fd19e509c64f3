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

import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as UnreadableSetting

from pier.errors import ConfigurationError
from pier.settings.environment import (
    describe_parse_error,
    describe_validation,
    dotenv_values,
    unknown_variables,
)
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

log = logging.getLogger(__name__)

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
    "load_settings",
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


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment (and .env); a bad one raises
    ConfigurationError, one line per bad setting naming its PIER_ variable."""
    lines: list[str] = []
    set_aside: dict[
        str, str
    ] = {}  # variables that are no JSON, out of the environment while the rest is read
    try:
        for _ in range(len(Settings.model_fields)):
            try:
                settings = Settings(**overrides)
                break
            except ValidationError as exc:
                lines += describe_validation(
                    Settings, exc, {**os.environ, **set_aside}, dotenv_values(Path(".env"))
                )
                break
            except UnreadableSetting as exc:  # no JSON where JSON is needed: say it, then read the rest
                field, line = describe_parse_error(Settings, exc, os.environ)
                lines.append(line)
                name = f"PIER_{field.upper()}" if field else None
                if name is None or name not in os.environ:
                    break
                set_aside[name] = os.environ.pop(name)
    finally:
        os.environ.update(set_aside)
    if lines:
        raise ConfigurationError(lines)
    return settings


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once. A PIER_* variable pier does not know
    is warned about first (with the closest known name): a misspelling may be
    why a setting is bad or missing."""
    for warning in unknown_variables(Settings, [*os.environ, *dotenv_values(Path(".env"))]):
        log.warning("%s", warning)
    return load_settings()
