"""pier's log lines: plain text for a terminal (the default), or, with
PIER_LOG_FORMAT=json, one JSON object a line for a log pipeline, for every
logger in the process (pier's, uvicorn's access and error logs, libraries'):
`time` (UTC, ISO 8601), `level`, `logger`, `message`, and where known the
`run_id` (the trajectory id), `collection`, `request_id` and `trace_id`, so a
run's every line, its trace and its audit entries are found by one id.

What is known comes from context variables: the lifecycle sets the run's
while it runs a run's stages (`run_context`), the API's middleware the
request's; a thread started without them logs without them. This module
imports only the standard library: the CLI configures it before anything else.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

FORMAT_VARIABLE = "PIER_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("pier_run_id", default=None)
collection: contextvars.ContextVar[str | None] = contextvars.ContextVar("pier_collection", default=None)
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("pier_request_id", default=None)
trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("pier_trace_id", default=None)

# What uvicorn's access log passes as its record's args, by name.
ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")
# A LogRecord's own attributes: anything else on a record is an `extra` to keep.
_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's message with terminal colours
}


def wanted_format() -> str:
    """json or text, as PIER_LOG_FORMAT says (text when unset)."""
    return "json" if os.environ.get(FORMAT_VARIABLE, "").strip().lower() == "json" else "text"


@contextmanager
def run_context(trajectory_id: str, collection_name: str | None, trace: str | None = None) -> Iterator[None]:
    """Log lines inside carry this run's ids."""
    tokens = [(run_id, run_id.set(trajectory_id)), (collection, collection.set(collection_name))]
    if trace:
        tokens.append((trace_id, trace_id.set(trace)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, var in (("run_id", run_id), ("collection", collection), ("request_id", request_id),
                         ("trace_id", trace_id)):  # fmt: skip
            value = getattr(record, key, None) or var.get()
            if value:
                line[key] = value
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            line.update(zip(ACCESS_FIELDS, record.args, strict=True))
        for key, value in vars(record).items():
            if key not in _RECORD_KEYS and key not in line and not key.startswith("_"):
                line[key] = value if isinstance(value, str | int | float | bool | None) else repr(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: int | str = logging.INFO, fmt: str | None = None) -> str:
    """One handler on the root logger, on stderr, in `fmt` (json or text;
    PIER_LOG_FORMAT when None); uvicorn's loggers hand their lines to it.
    Returns the format used."""
    fmt = fmt or wanted_format()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    if fmt == "json":
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = True
    return fmt
