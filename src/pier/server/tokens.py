"""API tokens: random, shown once, stored only as their SHA-256 (they carry 256
bits of entropy, so a fast unsalted hash is enough: there is nothing to
brute-force)."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

from pier.db import Store

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
    spares most requests a database read in a worker thread. Revoking a token
    through this server forgets it here at once; another replica on the same
    database cannot know, so each token is remembered for REMEMBER_SEC only:
    a token revoked anywhere is refused everywhere within that bound
    (docs/security.md)."""

    REMEMBER_SEC = 5.0

    def __init__(self, size: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self._size = size
        self._clock = clock
        self._known: dict[str, tuple[str, float]] = {}

    def get(self, token_hash: str) -> str | None:
        known = self._known.get(token_hash)
        if known is None:
            return None
        collection, seen = known
        if self._clock() - seen > self.REMEMBER_SEC:
            self._known.pop(token_hash, None)
            return None
        return collection

    def add(self, token_hash: str, collection: str) -> None:
        if len(self._known) >= self._size:
            self._known.clear()
        self._known[token_hash] = (collection, self._clock())

    def forget(self, token_hash: str) -> None:
        self._known.pop(token_hash, None)
