import pytest

from pier.errors import InputError
from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook

TEXT = """---
agent: script
secrets:
  TOKEN: {env: HOST_TOKEN, required: true}
primary_outputs: [./report.md, /app/results/data/x.csv]
vars: {who: world}
---
echo {{who}} {{secrets.TOKEN}} > {{results_dir}}/report.md
"""


def plan_of(text: str, env: dict | None = None, run: dict | None = None, **settings):
    step = resolve(task_from_runbook(parse(text)), run)
    return build_plan(step, RunInputs("id1", "c", "t", env or {}), Settings(**settings))


def test_secrets_render_from_their_env_variable():
    plan = plan_of(TEXT, env={"HOST_TOKEN": "tok-123"})
    assert "echo world tok-123 > /app/results/report.md" in plan.instruction
    assert plan.secret_values == ("tok-123",)


def test_primary_outputs_are_normalised_into_the_results_folder():
    assert plan_of(TEXT).primary_outputs == ("report.md", "data/x.csv")
    with pytest.raises(InputError, match="inside the results folder"):
        plan_of(TEXT.replace("./report.md", "../escape.md"))


def test_defaults_are_lowered_to_the_maxima_and_asking_above_them_is_refused():
    plan = plan_of(TEXT, default_cpus=3, default_memory="2G", max_timeout_sec=100)
    assert (plan.cpus, plan.memory, plan.timeout_sec, plan.network) == (3, "2G", 100, True)
    with pytest.raises(InputError, match=r"timeout_sec: 500 seconds is more .*PIER_MAX_TIMEOUT_SEC"):
        plan_of(TEXT.replace("agent: script", "agent: script\ntimeout_sec: 500"), max_timeout_sec=100)


def test_run_vars_replace_runbook_defaults():
    plan = plan_of(TEXT, run={"vars": {"who": "rust"}})
    assert plan.instruction.startswith("echo rust ")
