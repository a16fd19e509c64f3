"""Collection bodies: creation, tokens, environment."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from pier.storage.local import COLLECTION_NAME_PATTERN as NAME_PATTERN
from pier.storage.local import COLLECTION_NAME_RULE

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
MAX_ENV_VALUE = 64 * 1024


class CollectionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description=COLLECTION_NAME_RULE)


class CollectionPublic(BaseModel):
    name: str
    created_at: datetime


class TokenIssued(BaseModel):
    collection: str
    token: str = Field(description="shown once: pier keeps only its hash")


class TokenPublic(BaseModel):
    """A token as listed: its id (to revoke it) and label, never the token."""

    id: int
    collection: str
    created_at: datetime
    label: str | None = None


class TokenRevoked(BaseModel):
    collection: str
    id: int


class EnvironmentPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment_variables: dict[str, str | None] = Field(
        description="name -> value to set, or null to delete; other variables are kept"
    )


class EnvironmentPublic(BaseModel):
    collection: str
    environment_variables: list[str] = Field(description="names only: values are never returned")
