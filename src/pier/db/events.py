"""A run's log as numbered lines, for replay and live following (SSE)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.schemas import Event
from pier.db.tables import run_events
from pier.record import utcnow

# Appends are serialised per run (advisory lock / SQLite write lock), so a
# unique violation means a writer outside that protocol; retrying recovers.
APPEND_ATTEMPTS = 20


class EventStore(StoreBase):
    def append_event(self, trajectory_id: str, line: str, stage: str | None = None) -> int:
        """Append one line to the run's log; returns its seq (1-based)."""
        return self.append_events(trajectory_id, [line], stage)[0]

    def append_events(self, trajectory_id: str, lines: Iterable[str], stage: str | None = None) -> list[int]:
        """Append lines in order, atomically; returns their (contiguous) seqs."""
        batch = list(lines)
        if not batch:
            return []
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                with self._write() as connection:
                    return self._append(connection, trajectory_id, batch, stage)
            except IntegrityError:
                if attempt == APPEND_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, 0.005 * attempt))
        raise AssertionError("unreachable")

    def _append(
        self, connection: Connection, trajectory_id: str, lines: list[str], stage: str | None
    ) -> list[int]:
        self._lock(connection, f"pier.run_events:{trajectory_id}")
        first = self._last_seq(connection, trajectory_id) + 1
        seqs = list(range(first, first + len(lines)))
        ts = utcnow()
        rows = [
            {"trajectory_id": trajectory_id, "seq": seq, "ts": ts, "stage": stage, "line": line}
            for seq, line in zip(seqs, lines, strict=True)
        ]
        connection.execute(insert(run_events), rows)
        return seqs

    def events(self, trajectory_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """The run's lines with seq > after_seq, in order, at most `limit`."""
        query = (
            select(run_events.c.seq, run_events.c.ts, run_events.c.stage, run_events.c.line)
            .where(run_events.c.trajectory_id == trajectory_id, run_events.c.seq > after_seq)
            .order_by(run_events.c.seq)
            .limit(max(limit, 0))
        )
        with self._read() as connection:
            rows = connection.execute(query).all()
        return [Event(seq=r.seq, ts=r.ts, stage=r.stage, line=r.line) for r in rows]

    def last_seq(self, trajectory_id: str) -> int:
        """The seq of the run's last line; 0 when it has none."""
        with self._read() as connection:
            return self._last_seq(connection, trajectory_id)

    @staticmethod
    def _last_seq(connection: Connection, trajectory_id: str) -> int:
        query = select(func.max(run_events.c.seq)).where(run_events.c.trajectory_id == trajectory_id)
        return connection.scalar(query) or 0
