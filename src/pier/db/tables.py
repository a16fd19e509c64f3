"""The store's tables, as SQLAlchemy Core `Table`s: the one definition of their
columns that the store reads and writes through and that Alembic's autogenerate
compares the database against (`metadata`).

Core, not the ORM: the store's rows are plain values (a run's record is JSON,
the rest are columns a pydantic model or a dataclass takes as they come), so
mapped classes would add nothing but their import, which was about a fifth of
a read-only `pier` command's start-up (docs/speed.md).

The schema itself is owned by the Alembic migrations in `migrations/versions`;
these tables must match them (a unit test compares the two).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from pier.db.types import BigIntPK, JSONType, UTCDateTime

NAME = 255

# Fixed constraint names, so that the migrations can name (and later alter) them.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)


def _name(name: str, *, nullable: bool = False, **kwargs: Any) -> Column[str]:
    return Column(name, String(NAME), nullable=nullable, **kwargs)


def _time(name: str, *, nullable: bool = False) -> Column[datetime]:
    return Column(name, UTCDateTime(), nullable=nullable)


def _json(name: str) -> Column[Any]:
    return Column(name, JSONType, nullable=False)


def _serial(name: str = "id") -> Column[int]:
    """A 64-bit autoincrementing primary key (INTEGER on SQLite, which only
    autoincrements a column declared exactly so)."""
    return Column(name, BigIntPK, primary_key=True, autoincrement=True)


# A run is keyed by its trajectory id within its collection: the ids pier
# makes are random (so unique anyway), an id an ingest chose is its
# collection's own (another collection may choose the same).
runs = Table(
    "runs",
    metadata,
    _name("trajectory_id", primary_key=True),
    _name("collection", primary_key=True),
    _name("task"),
    Column("status", String(32), nullable=False),
    _time("created_at"),
    _time("updated_at"),
    _json("record"),
    Index("ix_runs_collection_task_created", "collection", "task", "created_at"),
    Index("ix_runs_status", "status"),
)

# A collection's use of the server's trial keys.
trials = Table(
    "trials",
    metadata,
    _name("collection", primary_key=True),
    _time("activated_at", nullable=True),
    Column("runs_used", Integer, nullable=False, server_default="0"),
)

# What a collection's calls through the chat-completions passthrough used, one
# row per provider, model and key source (its own key, or the server's trial
# key): counted as each call's answer ends (pier.server.services.passthrough).
model_usage = Table(
    "model_usage",
    metadata,
    _name("collection", primary_key=True),
    _name("provider", primary_key=True),
    _name("model", primary_key=True),
    Column("via", String(16), primary_key=True),
    Column("requests", BigInteger, nullable=False, server_default="0"),
    Column("errors", BigInteger, nullable=False, server_default="0"),
    Column("prompt_tokens", BigInteger, nullable=False, server_default="0"),
    Column("completion_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cached_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cost_usd", Float, nullable=False, server_default="0"),
    Column("unpriced_calls", BigInteger, nullable=False, server_default="0"),
    _time("first_at"),
    _time("last_at"),
)

# A label on a run. Apart from the record, so that adding one while the run is
# running cannot race the runner's saves; lists filter on it.
run_labels = Table(
    "run_labels",
    metadata,
    _serial(),
    _name("trajectory_id"),
    _name("collection", server_default=""),  # the run's
    _name("key"),
    Column("value", Text, nullable=False),
    _name("author"),
    _time("created"),
    Index("ix_run_labels_trajectory_id", "trajectory_id"),
    Index("ix_run_labels_key", "key"),
)

# One line of a run's log. The unique (trajectory_id, seq) index is also the
# index that reads by run use.
run_events = Table(
    "run_events",
    metadata,
    _serial(),
    _name("trajectory_id"),
    Column("seq", Integer, nullable=False),
    _time("ts"),
    Column("stage", String(64), nullable=True),
    Column("line", Text, nullable=False),
    UniqueConstraint("trajectory_id", "seq"),
)

collections = Table(
    "collections",
    metadata,
    _name("name", primary_key=True),
    _time("created_at"),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _name("collection", index=True),
    _name("token_hash", unique=True),
    _time("created_at"),
    _name("label", nullable=True),
)

tasks = Table(
    "tasks",
    metadata,
    _name("collection", primary_key=True),
    _name("name", primary_key=True),
    _json("definition"),
    _time("created_at"),
    _time("updated_at"),
    Column("description", Text, nullable=False, server_default=""),
)

collection_env = Table(
    "collection_env",
    metadata,
    _name("collection", primary_key=True),
    _name("name", primary_key=True),
    Column("value_encrypted", Text, nullable=False),
    _time("updated_at"),
)

# What is needed to start an accepted run again after a restart: its task and
# run parameters (never secret values). Kept until the run ends.
run_requests = Table(
    "run_requests",
    metadata,
    _name("trajectory_id", primary_key=True),
    _time("created_at"),
    _json("request"),
)

# A client's idempotency key for a run it asked for (the POST's
# `Idempotency-Key` header), per collection: a retry of that POST with the same
# key gets this run back instead of a second one.
run_keys = Table(
    "run_keys",
    metadata,
    _name("collection", primary_key=True),
    _name("key", primary_key=True),
    _name("trajectory_id"),
    _time("created_at"),
)

# A scheduled run of a task. `next_run_at` is the tick the scheduler fires next
# (None while paused); a server fires a tick only after moving it on with a
# conditional UPDATE, so two servers never fire the same one. `run_now_at` asks
# any server to fire once now (set by `pier routine run-now`).
routines = Table(
    "routines",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _name("collection"),
    _name("task"),
    _name("name"),
    Column("description", Text, nullable=True),
    _name("cron_expression"),
    Column("timezone", String(64), nullable=False),
    _json("init_params"),
    Column("enabled", Boolean, nullable=False),
    _time("next_run_at", nullable=True),
    _time("run_now_at", nullable=True),
    _time("last_run_at", nullable=True),
    _name("last_trajectory_id", nullable=True),
    _time("created_at"),
    _time("updated_at"),
    # The platform's cadence as sent (cron_expression is derived from it), or
    # null for a routine made from a cron expression.
    Column("cadence", JSONType, nullable=True),
    # Fernet tokens (pier.vault): a JSON object of secrets, and the webhook's secret.
    Column("secret_params_encrypted", Text, nullable=True),
    Column("webhook_url", Text, nullable=True),
    Column("webhook_secret_encrypted", Text, nullable=True),
    UniqueConstraint("collection", "task", "name"),
    Index("ix_routines_enabled_next_run_at", "enabled", "next_run_at"),
    # An id is never given again after a delete (SQLite reuses the highest one
    # without it; PostgreSQL's sequence never does): runs name their routine by
    # id, and a new routine must not inherit a deleted one's runs.
    sqlite_autoincrement=True,
)

# One change a token or a signed-in user made, or tried to (refusals too).
# Names only: a body is never kept, so a secret's value never is.
audit_events = Table(
    "audit_events",
    metadata,
    _serial(),
    _time("at"),
    _name("collection", nullable=True),
    _name("actor"),  # "admin", "token:<id>", "anonymous"
    Column("token_id", Integer, nullable=True),
    _name("token_name", nullable=True),
    _name("action"),  # "POST /api/v1/run/{collection}/{task}"
    _json("target"),  # the route's path parameters
    Column("status", Integer, nullable=False),
    _name("client", nullable=True),
    _name("user_agent", nullable=True),
    _name("object_id", nullable=True),  # the run, token, collection, task... it is about
    Column("outcome", String(16), nullable=True),  # ok, refused, failed
    Column("source", String(16), nullable=True),  # api, web, cli
    Column("request_id", String(128), nullable=True),  # the request's id, as its log lines carry it
    Column("prev_hash", String(64), nullable=True),  # the entry before's entry_hash ("" for the first)
    Column("entry_hash", String(64), nullable=True),  # sha256 over this entry's fields and prev_hash
    Index("ix_audit_events_collection_at", "collection", "at"),
    Index("ix_audit_events_at", "at"),
)

# The admin's overrides of the server's default quotas for one collection (only
# the quotas set: the others follow the server's defaults).
collection_quotas = Table(
    "collection_quotas",
    metadata,
    _name("collection", primary_key=True),
    _json("quotas"),
    _time("updated_at"),
)

# One webhook to deliver, kept until a receiver took it or its window closed.
# `id` is the delivery id receivers deduplicate on; `leased_until` is set while
# an attempt is open, so no second attempt overlaps it (on this server or another).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    _name("id", primary_key=True),
    _name("collection"),
    _name("trajectory_id"),
    Column("url", Text, nullable=False),
    Column("sealed_secret", Text, nullable=True),
    Column("body", Text, nullable=False),
    Column("state", String(32), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text, nullable=True),
    _time("created_at"),
    _time("next_attempt_at"),
    _time("deadline_at"),
    _time("leased_until", nullable=True),
    Index("ix_webhook_deliveries_state_next_attempt_at", "state", "next_attempt_at"),
)

# A task over a matrix (pier.experiments). `definition` is the matrix as given,
# `cells` what it expands to (fixed at creation, so attempts name cells by
# index), `task_definition` the task as it was then. A server works an
# experiment while it holds its lease (`lease_owner` until `lease_until`), so
# two servers on one store never schedule the same experiment at once and a
# server that died hands it on when its lease runs out.
experiments = Table(
    "experiments",
    metadata,
    Column("id", String(64), primary_key=True),
    _name("collection"),
    _name("name"),
    _name("task"),
    _json("definition"),
    _json("task_definition"),
    _json("cells"),
    Column("status", String(32), nullable=False),
    Column("reason", Text, nullable=True),
    _name("lease_owner", nullable=True),
    _time("lease_until", nullable=True),
    _time("created_at"),
    _time("updated_at"),
    _time("started_at"),
    _time("ended_at", nullable=True),
    Index("ix_experiments_collection_created_at", "collection", "created_at"),
    Index("ix_experiments_status", "status"),
)

# One try of one attempt of one cell: its run's trajectory id is chosen and
# stored before the run is accepted, so a server that dies in between starts
# that same run (or finds it started), never a second one. `seq` orders the
# attempts (attempt-major, so every cell fills at the same pace); a try that
# failed for an infrastructure reason is followed by one with `retry` + 1.
experiment_attempts = Table(
    "experiment_attempts",
    metadata,
    _serial(),
    Column("experiment_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("cell", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("retry", Integer, nullable=False),
    _name("trajectory_id"),
    Column("state", String(16), nullable=False),  # claimed | started | done
    Column("outcome", String(16), nullable=True),  # success | failure | infra | cancelled
    _time("created_at"),
    UniqueConstraint("experiment_id", "seq", "retry"),
    UniqueConstraint("trajectory_id"),
    Index("ix_experiment_attempts_experiment_id_state", "experiment_id", "state"),
)
