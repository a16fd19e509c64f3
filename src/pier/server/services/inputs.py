"""The checks every body a service takes meets, whichever way it came (a JSON
body, a multipart form, a web page's form)."""

from __future__ import annotations

from typing import Any

from pier.api.errors import invalid
from pier.api.limits import unstorable_field


def refuse_nul(value: Any, field: str = "body") -> None:
    """Multipart fields and parsed bodies meet the rule JSON bodies meet at the edge."""
    found = unstorable_field(value, field)
    if found:
        raise invalid(found, "must not contain a NUL character or an unpaired surrogate")
