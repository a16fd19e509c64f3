"""A run's variables are strict: a wrong name or a missing value is refused with
the fix, unless the runbook or the run says otherwise (see plan.vars_rules)."""

import pytest

from pier.errors import InputError, Problems
from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook

DECLARED = """---
agent: script
vars:
  person:
  greeting: hello
---
```bash
echo "{{greeting}} {{person}}" > {{results_dir}}/out.txt
```
"""

PLATFORM = """---
agent: script
---
```bash
echo "{{operation}} ${{ github.sha }} {{ a | b }}" > {{results_dir}}/out.txt
```
"""


def plan_of(text: str, run: dict | None = None, **settings):
    step = resolve(task_from_runbook(parse(text)), run)
    return build_plan(step, RunInputs("id1", "c", "t", {}), Settings(**settings))


def test_an_unknown_var_is_refused_naming_the_runbooks_variables():
    with pytest.raises(
        InputError, match=r"vars\.nme: this runbook has no variable 'nme' \(its variables: person, greeting\)"
    ):
        plan_of(DECLARED, {"vars": {"nme": "x", "person": "Ada"}})
    with pytest.raises(InputError, match=r"no variable 'nme' \(its variables: operation\)"):
        plan_of(PLATFORM, {"vars": {"nme": "x"}})


def test_extra_vars_pass_when_the_run_or_the_operator_allows_them():
    assert (
        "hello Ada"
        in plan_of(DECLARED, {"vars": {"nme": "x", "person": "Ada"}, "allow_extra_vars": True}).instruction
    )
    assert (
        "hello Ada"
        in plan_of(DECLARED, {"vars": {"nme": "x", "person": "Ada"}}, allow_extra_vars=True).instruction
    )


def test_a_declared_variable_without_a_value_is_refused_unless_allowed():
    with pytest.raises(
        InputError, match=r"variable \{\{person\}\} has no value: give it \(pier run --var person=VALUE"
    ):
        plan_of(DECLARED)
    plan = plan_of(DECLARED, {"allow_unfilled_vars": True})
    assert 'echo "hello {{person}}"' in plan.instruction
    assert any("{{person}} has no value: left as written" in w for w in plan.warnings)
    assert "hello Ada" in plan_of(DECLARED, {"vars": {"person": "Ada"}}).instruction


def test_an_undeclared_placeholder_is_an_error_naming_its_line():
    text = DECLARED.replace("{{person}}", "{{persn}}")
    with pytest.raises(
        InputError, match=r"\{\{persn\}\} is not one of the runbook's variables \(person, greeting\)"
    ) as caught:
        plan_of(text, {"vars": {"person": "Ada"}})
    assert caught.value.line == 8  # the echo line of the file


def test_a_runbook_without_vars_block_keeps_the_platforms_rule():
    plan = plan_of(PLATFORM)
    # Other tools' template text is left alone and not reported; the variable warns.
    assert "{{operation}} ${{ github.sha }} {{ a | b }}" in plan.instruction
    assert [w for w in plan.warnings if "{{" in w] == [
        "unfilled variable {{operation}} left as written (the runbook declares no vars:, so its placeholders "
        "are optional; give it with --var operation=VALUE)"
    ]


def test_every_problem_is_reported_at_once():
    text = DECLARED.replace("agent: script", "agent: script\nprimary_outputs: [../x]\nnetwork: {allow: 3}")
    with pytest.raises(Problems) as caught:
        plan_of(text, {"vars": {"nme": "x"}})
    messages = [str(p) for p in caught.value.problems]
    assert len(messages) == 4, messages
    assert [p.key for p in caught.value.problems] == ["vars", "vars.person", "primary_outputs", "network"]
