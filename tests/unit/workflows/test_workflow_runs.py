"""Workflows of the provider-free activities, run by the embedded executor:
steps in order, outputs addressable by path, failures naming the step."""

from __future__ import annotations

from tests.unit.workflows.conftest import ADMIN

ECHO = {
    "init_params": {"text": "Hello, Jetty!"},
    "step_configs": {"echo": {"activity": "text_echo", "text_path": "init_params.text"}},
    "steps": ["echo"],
}


def test_the_platforms_text_echo_workflow_runs(api):
    assert api.task("echo", ECHO).status_code in (200, 201)
    run = api.run("echo", {"text": "Test message"})
    assert run["status"] == "completed", run
    step = run["steps"]["echo"]
    assert step["outputs"] == {"text": "Test message"}
    assert step["inputs"] == {"text": "Test message"} and step["status"] == "completed"
    assert step["duration_seconds"] is not None and step["activity"] == "text_echo"
    assert run["completed_steps"] == ["echo"] and run["total_steps"] == ["echo"]


def test_steps_read_earlier_outputs_by_path_with_list_indexes(api):
    wf = {
        "init_params": {"doc": "abcdefghij", "who": {"names": ["ada", "bo"]}},
        "step_configs": {
            "split": {"activity": "text_split", "text_path": "init_params.doc", "chunk_size": 4, "overlap": 1},
            "second": {"activity": "text_echo", "text_path": "split.outputs.chunks[1]"},
            "last": {"activity": "text_echo", "text_path": "split.outputs.chunks[-1]"},
            "greet": {
                "activity": "text_template",
                "template": "{{name}} got {{chunk}} of {{count}}",
                "name_path": "init_params.who.names[0]",
                "chunk_path": "second.outputs.text",
                "count_path": "split.outputs.count",
            },
            "join": {"activity": "text_concatenate", "texts_path": ["greet.outputs.text", "last.outputs.text"],
                     "separator": " | "},
        },
        "steps": ["split", "second", "last", "greet", "join"],
    }  # fmt: skip
    assert api.task("paths", wf).status_code in (200, 201)
    run = api.run("paths")
    assert run["status"] == "completed", run["error"]
    assert run["steps"]["split"]["outputs"]["chunks"] == ["abcd", "defg", "ghij"]
    assert run["steps"]["greet"]["outputs"]["text"] == "ada got defg of 3"
    assert run["steps"]["join"]["outputs"]["text"] == "ada got defg of 3 | ghij"


def test_a_missing_path_fails_the_run_naming_the_step_and_the_path(api):
    wf = {
        "step_configs": {
            "split": {"activity": "text_split", "text": "abc", "chunk_size": 2},
            "pick": {"activity": "text_echo", "text_path": "split.outputs.chunks[5]"},
            "after": {"activity": "text_echo", "text": "never"},
        },
        "steps": ["split", "pick", "after"],
    }
    assert api.task("missing", wf).status_code in (200, 201)
    run = api.run("missing")
    assert run["status"] == "failed"
    assert run["failed_stage"] == "pick"
    assert (
        "'pick'" in run["error"] and "split.outputs.chunks[5]" in run["error"] and "2 items" in run["error"]
    )
    assert run["steps"]["pick"]["status"] == "failed" and run["steps"]["pick"]["error"] == run["error"]
    assert run["steps"]["split"]["status"] == "completed"
    assert run["steps"]["after"]["status"] == "skipped" and run["steps"]["after"]["outputs"] == {}
    assert run["completed_steps"] == ["split"]


def test_an_init_params_path_the_run_lacks_is_refused_before_it_runs(api):
    assert api.task("echo", ECHO).status_code in (200, 201)
    import json

    sent = api.c.post("/api/v1/run/team/echo", data={"init_params": json.dumps({})})
    assert sent.status_code in (200, 201, 202)  # the task's own init_params give text
    wf = {**ECHO, "init_params": {}}
    assert api.task("bare", wf).status_code in (200, 201)
    refused = api.c.post("/api/v1/run/team/bare", data={"init_params": "{}"})
    assert refused.status_code == 422, refused.text
    assert "step_configs.echo.text_path" in refused.text and "init_params" in refused.text


def test_a_workflow_with_bad_steps_is_refused_when_stored(api):
    bad = {
        "step_configs": {
            "a": {"activity": "text_echo", "text_path": "b.outputs.text"},
            "b": {"activity": "text_echo", "txt": "x"},
            "c": {"activity": "no_such_activity"},
        },
        "steps": ["a", "b", "c", "d"],
    }
    made = api.task("bad", bad)
    assert made.status_code == 422, made.text
    text = made.text
    assert "no_such_activity" in text  # the unknown activity
    assert api.c.get("/api/v1/tasks/team/bad").status_code == 404
    bad.pop("step_configs")["c"]
    bad2 = {
        "step_configs": {
            "a": {"activity": "text_echo", "text_path": "b.outputs.text"},
            "b": {"activity": "text_echo", "txt": "x"},
        },
        "steps": ["a", "b", "d"],
    }
    made = api.task("bad", bad2)
    assert made.status_code == 422
    assert "'b', which is not a step before this one" in made.text
    assert "has no parameter 'txt'" in made.text
    assert "step 'd' is in steps but has no step_configs entry" in made.text


def test_a_conditional_branch_runs_one_side_and_skips_the_other(api):
    wf = {
        "init_params": {"score": 4},
        "step_configs": {
            "gate": {"activity": "conditional_branch", "condition_path": "init_params.score",
                     "operator": "greater_than", "value": 3, "true_step": "good", "false_step": "bad"},
            "bad": {"activity": "text_echo", "text": "low"},
            "good": {"activity": "text_echo", "text": "high"},
            "end": {"activity": "text_echo", "text": "done"},
        },
        "steps": ["gate", "bad", "good", "end"],
    }  # fmt: skip
    assert api.task("branch", wf).status_code in (200, 201)
    high = api.run("branch")
    assert high["status"] == "completed", high["error"]
    assert high["steps"]["gate"]["outputs"]["result"] is True
    assert high["steps"]["bad"]["status"] == "skipped" and high["steps"]["good"]["outputs"]["text"] == "high"
    assert high["steps"]["end"]["status"] == "completed"
    low = api.run("branch", {"score": 1})
    assert low["steps"]["bad"]["outputs"]["text"] == "low" and low["steps"]["good"]["status"] == "skipped"
    assert low["steps"]["end"]["status"] == "completed"


def test_a_runbook_task_is_still_a_runbook_task(api):
    from pier.tasks.model import Task

    task = Task.model_validate({"init_params": {"instruction": "do it"}})
    assert not task.is_workflow and task.run_step().activity == "runbook"
    echo = Task.model_validate(ECHO)
    assert echo.is_workflow


def test_the_run_page_and_pier_logs_show_each_step(api):
    assert api.task("paths", {
        "init_params": {"doc": "abcdefgh"},
        "step_configs": {
            "split": {"activity": "text_split", "text_path": "init_params.doc", "chunk_size": 4},
            "pick": {"activity": "text_echo", "text_path": "split.outputs.chunks[9]"},
        },
        "steps": ["split", "pick"],
    }).status_code in (200, 201)  # fmt: skip
    run = api.run("paths")
    api.c.cookies.set("pier_session", ADMIN)
    page = api.c.get(f"/runs/{run['trajectory_id']}")
    assert page.status_code == 200, page.text
    html = page.text
    assert 'id="step-split"' in html and 'id="step-pick"' in html and "text_split" in html
    assert "abcd" in html and "split.outputs.chunks[9]" in html  # an output, and the failed step's error
    log = api.c.get(f"/api/v1/workflows-logs/{run['workflow_id']}").json()
    lines = [
        (e.get("stage"), e.get("message") or e.get("line")) for e in log.get("logs", log.get("events", []))
    ]
    text = repr(lines)
    assert "step split (text_split) started" in text and "step pick failed" in text, text


def test_pier_logs_shows_each_steps_inputs_outputs_and_error(api, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pier.cli import app

    assert api.task("paths", {
        "init_params": {"doc": "abcdefgh"},
        "step_configs": {
            "split": {"activity": "text_split", "text_path": "init_params.doc", "chunk_size": 4},
            "pick": {"activity": "text_echo", "text_path": "split.outputs.chunks[9]"},
        },
        "steps": ["split", "pick"],
    }).status_code in (200, 201)  # fmt: skip
    run = api.run("paths")
    monkeypatch.setenv("PIER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    out = CliRunner().invoke(app, ["logs", run["trajectory_id"]]).output
    assert '[split] inputs: {"text": "abcdefgh", "chunk_size": 4}' in out, out
    assert '[split] outputs: {"chunks": ["abcd", "efgh"], "count": 2}' in out
    assert "[pick] step pick failed: step 'pick': text_path: path 'split.outputs.chunks[9]'" in out


def test_a_routine_of_a_workflow_task_is_accepted_and_its_run_now_runs(api):
    assert api.task("echo", ECHO).status_code in (200, 201)
    made = api.c.post(
        "/api/v1/routines/team/echo",
        json={"name": "r", "cron": "@daily", "init_params_overrides": {"text": "from a routine"}},
    )
    assert made.status_code == 201, made.text
    now = api.c.post("/api/v1/routines/team/echo/r/run-now")
    assert now.status_code in (200, 201, 202), now.text
    tid = now.json().get("trajectory_id") or now.json()["workflow_id"].rsplit("--", 1)[1]
    run = api.wait("echo", tid)
    assert run["status"] == "completed" and run["steps"]["echo"]["outputs"]["text"] == "from a routine"
