"""A run crosses processes as a RunSpec: serializable, no secret value in clear."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet

from pier.executors.spec import Payload, RunSpec
from pier.tasks.model import Task
from pier.vault import Vault, VaultError


def payload() -> Payload:
    task = Task.model_validate({"init_params": {"agent": "script", "instruction": "x"}})
    return Payload(
        collection="c",
        task_name="t",
        task=task,
        run_params={"file_paths": ["uploads/a.txt"]},
        secret_params={"TOKEN": "very-secret-value"},
        webhook_url="https://example.invalid/hook",
        webhook_secret="hook-secret-value",
    )


def test_a_spec_holds_no_secret_in_clear_and_opens_with_the_key() -> None:
    vault = Vault(Fernet.generate_key())
    spec = RunSpec.seal("tid1", payload(), vault)
    wire = json.dumps(spec.model_dump(mode="json"))
    assert "very-secret-value" not in wire and "hook-secret-value" not in wire
    assert "uploads/a.txt" in wire, "input files travel as references"
    opened = RunSpec.model_validate(json.loads(wire)).open(vault)
    assert opened == payload()
    assert (opened.secret_params, opened.webhook_secret) == (
        {"TOKEN": "very-secret-value"},
        "hook-secret-value",
    )


def test_a_spec_sealed_with_another_key_does_not_open() -> None:
    spec = RunSpec.seal("tid1", payload(), Vault(Fernet.generate_key()))
    with pytest.raises(VaultError):
        spec.open(Vault(Fernet.generate_key()))
