import pytest
from tests.unit.agents.test_adapters import plan

from pier.cli import secret_env
from pier.errors import InputError
from pier.lifecycle.plan import require_secrets
from pier.runbook.model import SecretDecl

HOST = {"ANTHROPIC_API_KEY": "an", "OPENAI_API_KEY": "oa", "HOME": "/root", "REPORT": "r", "AWS_REGION": "eu"}


def test_pier_run_passes_only_what_the_agent_and_the_secrets_name():
    env = secret_env({"report": SecretDecl(env="REPORT")}, HOST, "claude-code")
    assert env == {"ANTHROPIC_API_KEY": "an", "REPORT": "r", "AWS_REGION": "eu"}
    assert secret_env({}, HOST, "script") == {}


def test_required_secret_missing_is_named():
    decls = {"report": {"env": "REPORT_TOKEN", "required": True}, "extra": {"required": False}}
    with pytest.raises(InputError, match="secret report is required: set REPORT_TOKEN"):
        require_secrets(plan("claude-code", secret_decls=decls))
    require_secrets(plan("claude-code", secret_decls=decls, env={"REPORT_TOKEN": "x"}))
