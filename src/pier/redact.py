"""Secret values never reach a log line or a stored record."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MASK = "***"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        fresh = {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}
        # Longest first, so a secret containing another is masked whole.
        self._secrets = sorted(set(self._secrets) | fresh, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def bytes(self, value: bytes) -> bytes:
        for secret in self._secrets:
            encoded = secret.encode()
            if encoded in value:
                value = value.replace(encoded, MASK.encode())
        return value

    def data(self, value: Any) -> Any:
        """A JSON-like value with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.data(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value
