"""What a route or a page adds to its request's audit entry: names and counts,
never a value. The API's middleware (`pier.api.observe`) writes the entry once
the request is answered; both the API and the web UI note into it, so it lives
below both."""

from __future__ import annotations

from typing import Any

AUDIT_DETAIL = "audit_detail"  # request.state key: what a route adds to its entry (names only)


def note(request: Any, **detail: Any) -> None:
    """What a route adds to its audit entry (names, counts; never a value)."""
    request.state.audit_detail = {**getattr(request.state, AUDIT_DETAIL, {}), **detail}
