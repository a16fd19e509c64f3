import pytest
from tests.unit.agents.test_adapters import plan

from pier.cli.run import secret_env
from pier.errors import InputError
from pier.lifecycle.plan import require_secrets
from pier.runbook import parse
from pier.tasks import ResolvedStep, resolve, task_from_runbook

HOST = {"ANTHROPIC_API_KEY": "an", "OPENAI_API_KEY": "oa", "HOME": "/root", "REPORT": "r", "AWS_REGION": "eu"}


def step(front: str) -> ResolvedStep:
    return resolve(task_from_runbook(parse(f"---\n{front}\n---\nbody\n")))


def test_pier_run_passes_only_what_the_agent_and_the_secrets_name():
    env = secret_env(step("agent: claude-code\nsecrets: {report: {env: REPORT}}"), HOST)
    assert env == {"ANTHROPIC_API_KEY": "an", "REPORT": "r", "AWS_REGION": "eu"}
    assert secret_env(step("agent: script"), HOST) == {}


def test_pier_run_passes_the_key_of_an_agent_inferred_from_the_model():
    env = secret_env(step("model: claude-sonnet-4"), HOST)
    assert env == {"ANTHROPIC_API_KEY": "an", "AWS_REGION": "eu"}


def test_required_secret_missing_is_named():
    decls = {"report": {"env": "REPORT_TOKEN", "required": True}, "extra": {"required": False}}
    with pytest.raises(InputError, match="secret report is required: set REPORT_TOKEN"):
        require_secrets(plan("claude-code", secret_decls=decls))
    require_secrets(plan("claude-code", secret_decls=decls, env={"REPORT_TOKEN": "x"}))
