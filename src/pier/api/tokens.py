"""API tokens: random, shown once, stored only as their SHA-256 (they carry 256
bits of entropy, so a fast unsalted hash is enough: there is nothing to
brute-force)."""

from __future__ import annotations

import hashlib
import secrets

from pier.store import Store

TOKEN_PREFIX = "pier_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(store: Store, collection: str, label: str | None = None) -> str:
    """A new token for an existing collection; only its hash is kept."""
    token = new_token()
    store.add_token(collection, hash_token(token), label)
    return token


class KnownTokens:
    """Token hash -> collection for tokens already seen valid: remembering them
    spares every request a database read in a worker thread. Revoking a token
    through this server forgets it here at once."""

    def __init__(self, size: int = 10_000):
        self._size = size
        self._known: dict[str, str] = {}

    def get(self, token_hash: str) -> str | None:
        return self._known.get(token_hash)

    def add(self, token_hash: str, collection: str) -> None:
        if len(self._known) >= self._size:
            self._known.clear()
        self._known[token_hash] = collection

    def forget(self, token_hash: str) -> None:
        self._known.pop(token_hash, None)
