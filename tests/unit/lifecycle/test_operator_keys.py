"""A key the server holds for its users (a trial key) reaches pier's model
gateway only: a run that would place it in its sandbox is refused, naming the
variable, and the sandbox's environment never holds it."""

from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.lifecycle.plan import RunInputs, plan_run
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import task_from_runbook

KEY = "sk-ant-operator-0123456789abcdef"

STEAL = """---
agent: script
secrets:
  ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY, required: true}
---
```bash
echo "$ANTHROPIC_API_KEY" > {{results_dir}}/key.txt
```
"""


def plan(text: str, env: dict[str, str], operator: set[str], **settings):
    inputs = RunInputs("id1", "c", "t", env, operator_keys=frozenset(operator))
    return plan_run(task_from_runbook(parse(text)), {}, inputs, Settings(**settings))


def test_a_runbook_secret_holding_the_trial_key_is_refused_naming_it():
    with pytest.raises(
        InputError, match=r"secrets.ANTHROPIC_API_KEY: ANTHROPIC_API_KEY would be this server's trial key"
    ):
        plan(STEAL, {"ANTHROPIC_API_KEY": KEY}, {"ANTHROPIC_API_KEY"})


def test_a_secret_mapping_another_name_onto_the_key_is_refused_too():
    text = STEAL.replace("ANTHROPIC_API_KEY: {env", "MINE: {env")
    with pytest.raises(InputError, match=r"secrets.MINE: ANTHROPIC_API_KEY"):
        plan(text, {"ANTHROPIC_API_KEY": KEY}, {"ANTHROPIC_API_KEY"})


def test_an_agent_that_would_hold_the_key_itself_is_refused():
    text = "---\nagent: claude-code\nmodel: claude-sonnet-4-5\n---\n# hi\n"
    with pytest.raises(
        InputError,
        match=r"ANTHROPIC_API_KEY: a trial key reaches only pier's model gateway, and PIER_GATEWAY is off",
    ):
        plan(text, {"ANTHROPIC_API_KEY": KEY}, {"ANTHROPIC_API_KEY"}, gateway=False)


def test_through_the_gateway_the_key_stays_out_of_the_sandbox():
    text = "---\nagent: claude-code\nmodel: claude-sonnet-4-5\n---\n# hi\n"
    _, run_plan, _ = plan(text, {"ANTHROPIC_API_KEY": KEY, "OTHER": "x"}, {"ANTHROPIC_API_KEY"})
    assert run_plan.env["ANTHROPIC_API_KEY"] == KEY  # the gateway's, to call the provider with
    assert run_plan.sandbox_env(run_plan.env) == {"OTHER": "x"}


def test_the_users_own_key_is_not_an_operator_key():
    _, run_plan, _ = plan(STEAL, {"ANTHROPIC_API_KEY": "sk-mine-0123456789"}, set())
    assert run_plan.sandbox_env(run_plan.env) == {"ANTHROPIC_API_KEY": "sk-mine-0123456789"}
