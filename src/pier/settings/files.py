"""Where pier keeps its state, and how private it is.

Files pier creates are its owner's alone (logs, the encrypted environment,
token hashes, keys): folders 0700, files 0600. The entry points set this umask;
the roots are made private here too, for whoever uses pier as a library."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> Path:
    """path as a folder only its owner can enter (made, or tightened if it exists)."""
    path = path.expanduser()
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    if path.stat().st_mode & 0o077:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def _default_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "pier"


class StateSettings(BaseModel):
    """State: the database, the run outputs and uploads, scratch folders."""

    home: Path = Field(default_factory=_default_home, description="state: db, storage, snapshots.yaml")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default SQLite in home")
    storage_dir: Path | None = Field(None, description="run outputs; default <home>/storage")
    storage_url: str | None = Field(
        None,
        description="where outputs and uploads live: file:///path or s3://bucket/prefix; default storage_dir",
    )
    storage_presign_sec: int = Field(
        0,
        ge=0,
        le=7 * 24 * 3600,
        description="on S3: file downloads redirect to URLs valid this long; 0 streams",
    )
    scratch_dir: Path | None = Field(None, description="runs' local working folders; default <home>/tmp")
    # The disk limit where the engine's storage driver has no quotas: each sandbox's
    # writable layer on a loop-mounted file of the limit's size, kept here.
    disk_guard_dir: Path | None = Field(None, description="sandbox disk files; default <home>/sandbox-disks")

    @field_validator("storage_url")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("file://", "s3://")):
            raise ValueError(f"{value!r} is no storage URL: write file:///PATH or s3://BUCKET/PREFIX")
        return value

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'pier.db'}"

    @property
    def storage_root(self) -> Path:
        return self.storage_dir or self.home / "storage"

    @property
    def storage_location(self) -> str:
        """PIER_STORAGE_URL, else the local folder as a file:// URL."""
        return self.storage_url or self.storage_root.expanduser().absolute().as_uri()

    @property
    def scratch_root(self) -> Path:
        return self.scratch_dir or self.home / "tmp"

    @property
    def snapshots_file(self) -> Path:
        return self.home / "snapshots.yaml"

    @property
    def secret_key_file(self) -> Path:
        return self.home / "secret.key"

    @property
    def layers_dir(self) -> Path:
        """Build locks and last-use marks of agent layers."""
        return self.home / "layers"

    @property
    def tools_seen_dir(self) -> Path:
        """Which tools each image (by content id) was found to have."""
        return self.home / "cache" / "tools"

    @property
    def disk_guard_root(self) -> Path:
        return self.disk_guard_dir or self.home / "sandbox-disks"
