from __future__ import annotations

import stat

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from pier.errors import InputError
from pier.settings import Settings
from pier.vault import Vault, VaultError, load_vault


def test_generated_key_is_private_kept_and_reused(tmp_path):
    settings = Settings(home=tmp_path)
    first = load_vault(settings)
    token = first.encrypt("value")
    assert "value" not in token and first.decrypt(token) == "value"
    key_file = tmp_path / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert load_vault(settings).decrypt(token) == "value"
    assert not list(tmp_path.glob(".secret.key.*"))


def test_configured_key_wins_and_a_wrong_key_says_what_to_do(tmp_path):
    key = Fernet.generate_key().decode()
    vault = load_vault(Settings(home=tmp_path, secret_key=SecretStr(key)))
    assert not (tmp_path / "secret.key").exists()
    token = vault.encrypt("v")
    with pytest.raises(VaultError, match="PIER_SECRET_KEY changed"):
        Vault(Fernet.generate_key()).decrypt(token)
    with pytest.raises(InputError, match="Fernet key"):
        Vault("not-a-key")
