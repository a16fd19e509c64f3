"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer
from sqlalchemy.types import TypeDecorator, TypeEngine


class JSONB(TypeDecorator[Any]):
    """JSON, as JSONB on PostgreSQL so later issues can index or query inside
    records. The PostgreSQL dialect is loaded only on PostgreSQL: a store on
    SQLite (every `pier` command's by default) never pays for it."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB as PostgresJSONB

            return dialect.type_descriptor(PostgresJSONB())
        return dialect.type_descriptor(JSON())


JSONType = JSONB()

# SQLite only autoincrements a column declared exactly INTEGER PRIMARY KEY.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out. SQLite keeps no zone, so it stores naive
    UTC (which also sorts correctly as text); naive inputs are taken as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
