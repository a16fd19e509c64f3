"""What a run may ask for: one set of rules at every edge (frontmatter, step
configs, init_params, CLI options), the operator's maxima on top."""

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.errors import InputError, RunbookError
from pier.lifecycle.plan import RunInputs, build_plan
from pier.limits import LimitError, run_limits
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook
from pier.tasks.model import Task

BODY = "---\nagent: script\n{extra}---\necho hi > {{{{results_dir}}}}/a.txt\n"


def plan(extra: str = "", run: dict | None = None, **settings):
    step = resolve(task_from_runbook(parse(BODY.format(extra=extra))), run)
    return build_plan(step, RunInputs("id1", "c", "t"), Settings(**settings))


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("memory", "0", "at least 32M"),  # Docker reads 0 as "no limit"
        ("memory", "1k", "at least 32M"),  # Docker's own floor is 6 MiB: a raw engine error
        ("memory", "lots", "not a memory size"),
        ("cpus", -1, "not a number of CPUs"),
        ("cpus", 0, "not a number of CPUs"),
        ("cpus", "nan", "not a number of CPUs"),
        ("timeout_sec", -5, "not a time limit"),
        ("timeout_sec", "abc", "not a time limit"),  # was a TypeError: a 500 from the API
        ("timeout_sec", 1.5, "not a time limit"),
        ("timeout_sec", True, "not a time limit"),
    ],
)
def test_a_bad_limit_in_init_params_is_refused_naming_the_field(field, value, says):
    with pytest.raises(LimitError, match=f"^{field}: .*{says}") as caught:
        plan(run={field: value})
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("field", "value", "setting"),
    [
        ("memory", "10T", "PIER_MAX_MEMORY"),
        ("cpus", 65, "PIER_MAX_CPUS"),
        ("timeout_sec", 1801, "PIER_MAX_TIMEOUT_SEC"),
    ],
)
def test_asking_above_the_operators_maximum_is_refused(field, value, setting):
    with pytest.raises(LimitError, match=f"^{field}: .*more than pier allows a run.*{setting}"):
        plan(run={field: value})


def test_operators_set_the_maxima():
    with pytest.raises(LimitError, match="at most 2G"):
        plan(run={"memory": "4G"}, max_memory="2G")
    assert plan(run={"memory": "2G"}, max_memory="2G").memory == "2G"
    assert plan(run={"cpus": 8}, max_cpus=8).cpus == 8
    # The defaults follow a smaller maximum rather than making every run fail.
    lowered = plan(max_cpus=1, max_memory="1G", max_timeout_sec=60)
    assert (lowered.cpus, lowered.memory, lowered.timeout_sec) == (1, "1G", 60)


def test_good_limits_pass_through():
    got = plan(run={"cpus": "1.5", "memory": "512M", "timeout_sec": "90"})
    assert (got.cpus, got.memory, got.timeout_sec) == (1.5, "512M", 90)
    assert run_limits(None, None, None, Settings()) == (4.0, "8G", 1800)


@pytest.mark.parametrize(
    ("line", "says"),
    [("memory: '0'", "at least 32M"), ("cpus: -1", "CPUs"), ("timeout_sec: abc", "time limit")],
)
def test_frontmatter_limits_are_checked_with_the_line(line, says):
    # line:column of the key
    with pytest.raises(RunbookError, match=f":3:1: frontmatter key '{line.split(':')[0]}'.*{says}"):
        parse(BODY.format(extra=line + "\n"))


def test_a_tasks_step_config_is_checked_too():
    with pytest.raises(ValueError, match="at least 32M"):
        Task.model_validate({"step_configs": {"run": {"memory": "0"}}})


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--memory", "1k"], "--memory: '1k' is less than a sandbox can run in"),
        (["--memory", "0"], "--memory: '0' is less than a sandbox can run in"),
        (["--cpus", "-1"], "--cpus: "),
        (["--timeout", "-5"], "--timeout: "),
        (["--memory", "10T"], "memory: 10T is more than pier allows a run"),
    ],
)
def test_pier_run_refuses_bad_limits_with_exit_2_before_any_sandbox(tmp_path, monkeypatch, option, says):
    monkeypatch.setenv("PIER_HOME", str(tmp_path / "home"))
    from pier.settings import get_settings

    get_settings.cache_clear()
    (tmp_path / "RUNBOOK.md").write_text(BODY.format(extra=""))
    result = CliRunner().invoke(app, ["run", str(tmp_path), *option])
    get_settings.cache_clear()
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())


def test_limit_errors_are_input_errors():
    # The CLI's exit 2 and the API's 422 both key on InputError.
    assert issubclass(LimitError, InputError)


def test_pier_validate_applies_the_same_maxima(tmp_path):
    (tmp_path / "RUNBOOK.md").write_text(BODY.format(extra="memory: 10T\n"))
    result = CliRunner().invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "memory: 10T is more than pier allows a run" in " ".join(result.output.split())


@pytest.mark.parametrize("name", ["max_memory", "default_memory"])
def test_an_operator_setting_that_is_no_memory_size_is_refused_at_start(name):
    with pytest.raises(ValueError, match=r"is not a memory size|less than a sandbox can run in"):
        Settings(**{name: "lots"})
    with pytest.raises(ValueError, match="less than a sandbox can run in"):
        Settings(**{name: "1k"})


LIMITED = "---\nagent: script\ntimeout_sec: 600\ncpus: 2\nmemory: 4G\n---\n# t\n"


def plan_text(text: str, run: dict, **settings):
    from pier.lifecycle.plan import RunInputs, build_plan
    from pier.runbook import parse
    from pier.tasks import resolve, task_from_runbook

    step = resolve(task_from_runbook(parse(text)), run)
    return build_plan(step, RunInputs("id", "c", "t"), Settings(**settings))


def test_init_params_lower_the_tasks_limits():
    """The reproduction: `init_params: {timeout_sec: 3}` was ignored when the runbook set one."""
    got = plan_text(LIMITED, {"timeout_sec": 3, "cpus": 0.5, "memory": "512M"})
    assert (got.timeout_sec, got.cpus, got.memory) == (3, 0.5, "512M")
    assert plan_text(LIMITED, {}).timeout_sec == 600


@pytest.mark.parametrize(("field", "value"), [("timeout_sec", 601), ("cpus", 3), ("memory", "5G")])
def test_init_params_never_raise_the_tasks_limits(field, value):
    with pytest.raises(
        LimitError, match=f"^{field}: init_params asks for {value}, more than the task allows"
    ):
        plan_text(LIMITED, {field: value})


@pytest.mark.parametrize(
    ("front", "setting"),
    [
        ("timeout_sec: 99999", "PIER_MAX_TIMEOUT_SEC"),
        ("cpus: 1000", "PIER_MAX_CPUS"),
        ("memory: 1T", "PIER_MAX_MEMORY"),
    ],
)
def test_every_task_limit_is_held_to_the_operators_maximum_the_same_way(front, setting):
    with pytest.raises(LimitError, match=setting):
        plan_text(f"---\nagent: script\n{front}\n---\n# t\n", {})
    with pytest.raises(LimitError, match=setting):  # and as init_params on a task without limits
        key, value = front.split(": ")
        plan_text("---\nagent: script\n---\n# t\n", {key: int(value) if value.isdigit() else value})
