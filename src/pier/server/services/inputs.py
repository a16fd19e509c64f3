"""The checks every body a service takes meets, whichever way it came (a JSON
body, a multipart form, a web page's form)."""

from __future__ import annotations

from typing import Any

from pier.server.errors import invalid


def refuse_nul(value: Any, field: str = "body") -> None:
    """Multipart fields and parsed bodies meet the rule JSON bodies meet at the edge."""
    found = unstorable_field(value, field)
    if found:
        raise invalid(found, "must not contain a NUL character or an unpaired surrogate")


def _unstorable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # an unpaired surrogate, which JSON's \uD800 can spell
        return True
    return False


def unstorable_field(value: object, field: str = "body") -> str | None:
    """The first field (dotted path) whose key or text no store can keep."""
    if isinstance(value, str):
        return field if _unstorable(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{field}.{key}" if field != "body" else str(key)
            found = _printable(name) if _unstorable(str(key)) else unstorable_field(item, name)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = unstorable_field(item, f"{field}.{index}")
            if found:
                return found
    return None


def _printable(name: str) -> str:
    return name.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode()
