"""A collection's model usage outside runs: what its calls through the
chat-completions passthrough used, by provider, model and key source. What
the counts mean belongs to the caller (pier.server.services.passthrough)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from pier.db.base import StoreBase
from pier.db.tables import model_usage
from pier.record import utcnow

COUNTS = ("requests", "errors", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd",
          "unpriced_calls")  # fmt: skip


class UsageStore(StoreBase):
    def add_model_usage(self, collection: str, provider: str, model: str, via: str, **counts: Any) -> None:
        """Add one call's counts (requests, errors, tokens, cost_usd, unpriced_calls) to its row."""
        unknown = set(counts) - set(COUNTS)
        if unknown:
            raise ValueError(f"not a usage count: {', '.join(sorted(unknown))}")
        now = utcnow()
        values = {name: counts.get(name, 0) for name in COUNTS}
        statement = self._insert(model_usage).values(
            collection=collection,
            provider=provider,
            model=model,
            via=via,
            first_at=now,
            last_at=now,
            **values,
        )
        statement = statement.on_conflict_do_update(
            index_elements=[model_usage.c.collection, model_usage.c.provider, model_usage.c.model,
                            model_usage.c.via],
            set_={**{name: model_usage.c[name] + statement.excluded[name] for name in COUNTS},
                  "last_at": statement.excluded.last_at},
        )  # fmt: skip
        with self._write() as connection:
            connection.execute(statement)

    def model_usage(self, collection: str) -> list[dict[str, Any]]:
        """The collection's rows, most used first."""
        query = (
            select(model_usage)
            .where(model_usage.c.collection == collection)
            .order_by(model_usage.c.requests.desc(), model_usage.c.provider, model_usage.c.model)
        )
        with self._read() as connection:
            return [dict(row._mapping) for row in connection.execute(query)]
