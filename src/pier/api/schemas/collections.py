"""Collection bodies: creation, tokens, environment."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from pier.names import COLLECTION_NAME_PATTERN as NAME_PATTERN
from pier.names import COLLECTION_NAME_RULE
from pier.server.models import ENV_NAME_PATTERN as ENV_NAME_PATTERN
from pier.server.models import MAX_ENV_VALUE as MAX_ENV_VALUE


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


# What stands for every value: the platform answers the environment as an object
# (its MCP server reads the names as its keys), and a value is never returned.
MASKED = "********"


class EnvironmentPublic(BaseModel):
    collection: str
    environment_variables: dict[str, str] = Field(
        description=f"name -> {MASKED!r}: the names, as an object's keys; values are never returned"
    )
    names: list[str] = Field(description="the same names, sorted")

    @classmethod
    def of(cls, collection: str, names: list[str]) -> EnvironmentPublic:
        return cls(
            collection=collection, environment_variables=dict.fromkeys(names, MASKED), names=sorted(names)
        )


MAX_QUOTA = 2**62  # bytes or counts: anything a 64-bit column keeps


class QuotaOverrides(BaseModel):
    """The admin's quotas for one collection; a quota left out (or null)
    follows the server's default (PIER_QUOTA_*)."""

    model_config = ConfigDict(extra="forbid")

    concurrent_runs: int | None = Field(None, ge=1, le=MAX_QUOTA, description="runs executing at once")
    queued_runs: int | None = Field(None, ge=0, le=MAX_QUOTA, description="runs waiting for a slot")
    streams_per_token: int | None = Field(None, ge=1, le=MAX_QUOTA, description="live log streams per token")
    upload_bytes: int | None = Field(None, ge=0, le=MAX_QUOTA, description="stored uploads, in all")
    output_bytes: int | None = Field(None, ge=0, le=MAX_QUOTA, description="stored run outputs, in all")


class QuotasPublic(BaseModel):
    collection: str
    quotas: dict[str, int | None] = Field(description="in force: the overrides, else the defaults")
    overrides: dict[str, int | None] = Field(description="the admin's, for this collection")
    defaults: dict[str, int | None] = Field(
        description="the server's (PIER_QUOTA_*); concurrent_runs null: any slot"
    )


class ModelUsageRow(BaseModel):
    provider: str
    model: str = Field(description="as the provider names it")
    via: str = Field(description="collection: its own key; trial: the server's trial key")
    requests: int
    errors: int = Field(description="requests the provider (or the gateway) answered 4xx/5xx")
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float = Field(description="the list price (genai-prices), or the provider's own reported cost")
    unpriced_calls: int = Field(description="calls whose model has no known price (not in cost_usd)")
    first_at: datetime
    last_at: datetime


class ModelUsagePublic(BaseModel):
    collection: str
    totals: dict[str, int | float]
    models: list[ModelUsageRow]
