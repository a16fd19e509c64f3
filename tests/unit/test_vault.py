from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from pier import vault as vault_module
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
    with pytest.raises(VaultError) as changed:
        Vault(Fernet.generate_key()).decrypt(token)
    assert str(changed.value) == (
        "a collection environment value cannot be decrypted: PIER_SECRET_KEY changed since it "
        "was stored; restore the old key or set the variable again"
    )
    with pytest.raises(InputError) as bad:
        Vault("not-a-key")
    # The command in the message must work as written: run it.
    command = str(bad.value).split("`")[1]
    assert str(bad.value).startswith("PIER_SECRET_KEY is not a Fernet key: generate one with `python -c ")
    assert command.startswith("python -c ")
    script = command.removeprefix("python -c ").strip("'")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert Vault(done.stdout.strip()).decrypt(Vault(done.stdout.strip()).encrypt("x")) == "x"


def test_the_key_file_folder_is_created(tmp_path):
    settings = Settings(home=tmp_path / "not" / "yet")
    assert load_vault(settings).decrypt(load_vault(settings).encrypt("v")) == "v"


def test_of_two_processes_creating_the_key_at_once_the_first_key_wins(tmp_path, monkeypatch):
    """The other process links its key file first: this one reads that key."""
    settings = Settings(home=tmp_path)
    winner = Fernet.generate_key()
    real_link = os.link

    def link_after_the_other(src, dst):
        Path(dst).write_bytes(winner + b"\n")
        real_link(src, dst)  # raises FileExistsError, as it would in the race

    monkeypatch.setattr(vault_module.os, "link", link_after_the_other)
    vault = load_vault(settings)
    assert vault.decrypt(Vault(winner).encrypt("v")) == "v"
    assert not list(tmp_path.glob(".secret.key.*")), "the loser's temporary key is removed"
