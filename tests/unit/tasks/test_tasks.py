import pytest
from pydantic import ValidationError

from pier.errors import TaskError
from pier.runbook import parse
from pier.tasks import Task, infer_agent, lookup, merge_init_params, resolve, step_override, task_from_runbook

RUNBOOK = """---
model: gpt-5.5
snapshot: prism-playwright
cpus: 2
memory: 4G
checks:
  - {name: r, type: file_exists, path: a.md}
---
Write {{results_dir}}/a.md
"""


@pytest.mark.parametrize(
    ("model", "agent"),
    [
        ("claude-sonnet-4", "claude-code"),
        ("anthropic/claude-sonnet-4.6", "claude-code"),
        ("gpt-5.5", "codex"),
        ("o3-mini", "codex"),
        ("o4-mini", "codex"),
        ("openai/gpt-4o", "codex"),
        ("gemini-2.5-pro", "gemini-cli"),
        ("google/gemini-2.5-pro", "gemini-cli"),
        ("google/nano-banana", None),
        (None, None),
    ],
)
def test_agent_inferred_from_model(model, agent):
    assert infer_agent(model) == agent


def test_runbook_becomes_task_with_step_limits():
    task = task_from_runbook(parse(RUNBOOK))
    assert task.init_params["agent"] == "codex"
    assert task.init_params["snapshot"] == "prism-playwright"
    assert task.step_configs["run"].cpus == 2 and task.step_configs["run"].memory == "4G"
    assert task.steps == ["run"]


def test_default_snapshot_when_frontmatter_has_none():
    task = task_from_runbook(parse("---\nagent: script\n---\nbody"))
    assert task.init_params["snapshot"] == "python312-uv"


def test_run_params_merge_per_top_level_key():
    merged = merge_init_params({"vars": {"a": 1, "b": 2}, "agent": "codex"}, {"vars": {"a": 9}})
    assert merged == {"vars": {"a": 9}, "agent": "codex"}


def test_a_runs_code_checks_override_the_tasks_per_key():
    """The platform's code_checks is a task default "a run may override per key".
    Before: a run's {"timeout_sec": 60} replaced the whole block, dropping the
    task's sources and executor."""
    task = {"code_checks": {"executor": "agent", "timeout_sec": 120, "sources": [{"name": "s"}]}}
    merged = merge_init_params(task, {"code_checks": {"timeout_sec": 60}, "agent": "script"})
    assert merged["code_checks"] == {"executor": "agent", "timeout_sec": 60, "sources": [{"name": "s"}]}
    # A value that is no mapping still replaces (the plan refuses it, naming the key).
    assert merge_init_params(task, {"code_checks": "x"})["code_checks"] == "x"


def test_a_runs_code_checks_override_the_runbooks_frontmatter_per_key():
    runbook = "---\nagent: script\ncode_checks:\n  executor: agent\n  timeout_sec: 120\n---\nbody"
    step = resolve(
        Task.model_validate({"init_params": {"instruction": runbook}}), {"code_checks": {"timeout_sec": 30}}
    )
    assert step.code_checks == {"executor": "agent", "timeout_sec": 30}
    step = resolve(Task.model_validate({"init_params": {"instruction": runbook}}))
    assert step.code_checks == {"executor": "agent", "timeout_sec": 120}


def test_image_with_empty_snapshot_overrides_task_default():
    step = resolve(task_from_runbook(parse(RUNBOOK)), {"snapshot": "", "image": "ghcr.io/x/y:1"})
    assert step.snapshot == "" and step.image == "ghcr.io/x/y:1"
    assert step.cpus == 2 and step.checks[0]["name"] == "r"


def test_path_expressions_resolve_custom_locations():
    task = Task.model_validate(
        {
            "init_params": {"cfg": {"who": "script"}, "text": "---\n---\nhi", "instruction": "x"},
            "step_configs": {
                "run": {"agent_path": "init_params.cfg.who", "instruction_path": "init_params.text"}
            },
        }
    )
    step = resolve(task)
    assert step.agent == "script" and step.body == "hi"
    assert lookup("init_params.missing.deeper", {"init_params": {}}) is None


def test_hand_written_task_takes_missing_keys_from_instruction_frontmatter():
    task = Task(init_params={"instruction": RUNBOOK})
    step = resolve(task)
    assert step.agent is None and step.model == "gpt-5.5" and step.snapshot == "prism-playwright"


def test_bad_task_shapes_name_the_field():
    with pytest.raises(ValidationError, match="steps"):
        Task.model_validate({"steps": ["a", "b"]})
    with pytest.raises(ValidationError, match="memory"):
        Task.model_validate({"step_configs": {"run": {"memory": "lots"}}})
    with pytest.raises(ValidationError, match="bogus"):
        Task.model_validate({"step_configs": {"run": {"bogus": 1}}})
    with pytest.raises(TaskError, match="instruction"):
        resolve(Task(init_params={}))
    with pytest.raises(TaskError, match="file_paths"):
        resolve(Task(init_params={"instruction": "x", "file_paths": 5}))


def test_cli_overrides_replace_only_given_limits():
    step = step_override(task_from_runbook(parse(RUNBOOK)).run_step(), cpus=1.5, memory=None)
    assert step.cpus == 1.5 and step.memory == "4G"


def test_unknown_init_params_are_reported():
    step = resolve(Task(init_params={"instruction": "x", "colour": "red"}))
    assert "unknown init_params key 'colour' (kept, not used)" in step.warnings


def test_a_workflow_step_with_an_activity_pier_has_not_got_is_named():
    from pier.tasks.model import unknown_activity

    assert unknown_activity({"step_configs": {"run": {"activity": "runbook"}}}) is None
    assert unknown_activity({"init_params": {}}) is None
    field, message = unknown_activity(
        {"steps": ["a", "run"], "step_configs": {"a": {"activity": "llm_call"}, "run": {}}}
    )
    assert field == "step_configs.a.activity"
    assert "'llm_call'" in message and "pier has: runbook" in message


def test_the_default_snapshot_is_the_callers_not_read_from_settings(monkeypatch):
    monkeypatch.setenv("PIER_DEFAULT_SNAPSHOT", "from-the-environment")
    task = task_from_runbook(parse("---\nagent: script\n---\nbody"), "handed-in")
    assert task.init_params["snapshot"] == "handed-in"
