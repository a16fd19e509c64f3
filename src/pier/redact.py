"""Secret values never reach a log line or a stored record: neither as written nor
in the encodings an agent most often prints them in (base64, base64url, hex,
URL-encoding, reversed), nor split across lines (a line that ends with the
start of a secret, begins with its end, or is a piece of it, as `fold` or a
wrapping terminal prints it). What masking cannot catch is listed in the README."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words
# Encoded forms of shorter secrets are short enough to occur by chance in other
# base64 or hex (a 5-character base64 run), so those are masked only as written.
MIN_ENCODED_SECRET_LEN = 8
_B64_TO_URL = str.maketrans("+/", "-_")
# `base64` (coreutils) wraps its output at 76 characters and `openssl base64` at
# 64, so a long secret piped alone into either is printed over several lines,
# which are masked one by one; pieces shorter than this are too likely by chance.
_WRAP_WIDTHS = (64, 76)
_MIN_PIECE_LEN = 12
# A secret split across lines is masked piece by piece, each piece at least this
# long (shorter pieces are too likely by chance), for secrets at least twice it.
MIN_FRAGMENT_LEN = 8


def base64_cores(raw: bytes) -> set[str]:
    """The base64 text that `raw` always becomes inside a longer base64 stream,
    at each of the three byte alignments it can start at: the characters that
    depend on `raw` alone (those sharing bits with the neighbours are left out,
    so at most one character either side of a masked core is left over)."""
    cores = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        start = -(-8 * shift // 6)  # first character with no bit of the padding
        end = 8 * (shift + len(raw)) // 6  # last character all of whose bits are raw's
        cores.add(encoded[start:end])
    return cores


def encoded_forms(secret: str) -> set[str]:
    """`secret` as written and, when it is long enough, as commonly encoded."""
    forms = {secret}
    if len(secret) < MIN_ENCODED_SECRET_LEN:
        return forms
    raw = secret.encode()
    forms |= {secret[::-1], raw.hex(), raw.hex().upper()}
    forms |= {quote(secret), quote(secret, safe=""), quote_plus(secret)}
    cores = base64_cores(raw)
    cores |= wrapped_pieces(base64.b64encode(raw).decode()[: 8 * len(raw) // 6])
    for core in cores:
        forms |= {core, core.translate(_B64_TO_URL)}
    return forms


def wrapped_pieces(encoded: str) -> set[str]:
    """The lines a wrapping encoder prints for a stream that starts with the secret."""
    pieces = set()
    for width in _WRAP_WIDTHS:
        if len(encoded) > width:
            chunks = (encoded[i : i + width] for i in range(0, len(encoded), width))
            pieces |= {chunk for chunk in chunks if len(chunk) >= _MIN_PIECE_LEN}
    return pieces


def mask_fragments(line: str, secret: str, mask: str = MASK) -> str:
    """line with the pieces of secret a line break split off masked: its end when
    it is the secret's start, its start when it is the secret's end, and the whole
    line when it lies inside the secret."""
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    if len(body) < MIN_FRAGMENT_LEN:
        return line
    bare = body.strip()
    if len(bare) >= MIN_FRAGMENT_LEN and bare in secret:
        return body.replace(bare, mask) + ending
    # Each test below is skipped unless the line's edge is in the secret at all, so
    # an ordinary line costs two substring searches.
    if body[-MIN_FRAGMENT_LEN:] in secret:
        for size in range(min(len(body), len(secret) - 1), MIN_FRAGMENT_LEN - 1, -1):
            if body.endswith(secret[:size]):
                body = body[: len(body) - size] + mask
                break
    if body[:MIN_FRAGMENT_LEN] in secret:
        for size in range(min(len(body), len(secret) - 1), MIN_FRAGMENT_LEN - 1, -1):
            if body.startswith(secret[-size:]):
                body = mask + body[size:]
                break
    return body + ending


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()):
        self._forms: list[str] = []
        self._whole: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        fresh = set()
        for secret in secrets:
            if secret and len(secret) >= _MIN_SECRET_LEN:
                fresh |= encoded_forms(secret)
                if len(secret) >= 2 * MIN_FRAGMENT_LEN and secret not in self._whole:
                    self._whole.append(secret)
        # Longest first, so a secret (or form) containing another is masked whole.
        self._forms = sorted(set(self._forms) | fresh, key=len, reverse=True)
        self._byte_forms = [form.encode() for form in self._forms]
        # bytes are matched as latin-1 text: one character per byte, nothing lost
        self._byte_whole = [secret.encode().decode("latin-1") for secret in self._whole]

    def __bool__(self) -> bool:
        return bool(self._forms)

    def text(self, value: str) -> str:
        for form in self._forms:
            if form in value:
                value = value.replace(form, MASK)
        for secret in self._whole:
            value = "".join(mask_fragments(line, secret) for line in value.splitlines(keepends=True))
        return value

    def bytes(self, value: bytes) -> bytes:
        for form in self._byte_forms:
            if form in value:
                value = value.replace(form, MASK.encode())
        if self._byte_whole:
            text = value.decode("latin-1")
            for secret in self._byte_whole:
                text = "".join(mask_fragments(line, secret) for line in text.splitlines(keepends=True))
            value = text.encode("latin-1")
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
