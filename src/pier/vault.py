"""Collection environment values at rest: Fernet (AES-128-CBC + HMAC-SHA256).

The key comes from PIER_SECRET_KEY, or is generated once into <home>/secret.key
(readable by its owner only), so an embedded server works without set up and
keeps reading what it wrote across restarts.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from pier.errors import InputError, PierError
from pier.settings import Settings


class VaultError(PierError, RuntimeError):
    """A stored value cannot be decrypted with the current key."""


class Vault:
    def __init__(self, key: bytes | str):
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError):
            raise InputError(
                "PIER_SECRET_KEY is not a Fernet key: generate one with "
                "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
            ) from None

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise VaultError(
                "a collection environment value cannot be decrypted: PIER_SECRET_KEY changed since it "
                "was stored; restore the old key or set the variable again"
            ) from None


def load_vault(settings: Settings) -> Vault:
    if settings.secret_key is not None:
        return Vault(settings.secret_key.get_secret_value())
    return Vault(_key_file(settings.secret_key_file))


def _key_file(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(Fernet.generate_key())
        # link() fails when the file exists: of two processes starting at once,
        # the first one's key wins and both read it, never a half-written file.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        tmp.unlink()
    return path.read_bytes().strip()
