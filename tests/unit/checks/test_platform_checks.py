"""The platform's `## Code Checks`, `code_checks:` and evaluation report v2:
parsing, compiling to pier's check model, the merge, secret exposure, the note
for the agent, and the script agent's steps."""

from __future__ import annotations

import pytest

from pier.agents.script import shell_blocks
from pier.checks.model import AgentCheck, CommandCheck, InvalidCheck, MinSize, validate_check
from pier.checks.platform import CodeChecksConfig, code_checks_config, compile_code_checks
from pier.checks.report import merge_report
from pier.errors import InputError
from pier.lifecycle.evaluation import agent_note, exposure, plan_checks
from pier.lifecycle.plan import secret_variable
from pier.record import CheckResult
from pier.runbook.sections import code_checks
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings
from pier.tasks.build import infer_agent

F = "```"

BODY = f"""# Task

## Step 1: Do it

{F}bash
echo step-one
{F}

## Code Checks

Some prose, and a fence that is not under a check heading is not a check.

### outputs-exist — Every output exists

{F}bash
test -s {{{{results_dir}}}}/a.txt
{F}

### size — Big enough

{F}yaml
use: min_size
path: a.txt
min_bytes: 3
{F}

### look — Look at it

{F}agent
Open the page and confirm it renders.
{F}

### mine — Run by the agent

{F}bash executor=agent
curl -fsS localhost:8000/health
{F}

## Write Validation Report

{F}json
{{"version": 2}}
{F}

{F}bash
echo template
{F}

## Step 9: After

{F}sh
echo step-two
{F}
"""


def compiled(body: str = BODY, **config: object):
    return compile_code_checks(code_checks(body), code_checks_config(config or None))


def test_each_heading_becomes_one_check_of_its_fence_kind():
    result = compiled()
    kinds = {c.name: type(c) for c in result.checks}
    assert kinds == {"outputs-exist": CommandCheck, "size": MinSize, "look": AgentCheck, "mine": CommandCheck}
    by = {c.name: c for c in result.checks}
    assert by["outputs-exist"].title == "Every output exists" and by["outputs-exist"].runner == "jetty"
    assert by["outputs-exist"].timeout_sec == 120, "the platform's default per-check timeout"
    assert by["size"].min_bytes == 3 and by["size"].runs_here
    assert by["look"].runner == "agent" and "confirm it renders" in by["look"].instruction
    assert by["mine"].runner == "agent", "a fence's executor=agent is the agent's"
    assert result.lines["size"] == (BODY.splitlines().index("### size — Big enough") + 1, 1)


def test_executor_agent_hands_every_command_check_to_the_agent():
    result = compiled(executor="agent", timeout_sec=30)
    assert all(c.runner == "agent" for c in result.checks)
    assert {c.timeout_sec for c in result.checks} == {30}


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ("### nofence — none\n\ntext only\n", "has no fenced block"),
        (f"### two — two\n\n{F}bash\na\n{F}\n\n{F}bash\nb\n{F}\n", "has 2 fenced blocks"),
        (f"### bad use — spaces\n\n{F}bash\ntrue\n{F}\n", "must read `### <id> — <name>`"),
        (f"### u — unknown\n\n{F}yaml\nuse: nope\n{F}\n", "'nope' is not a built-in"),
        (f"### s — spec\n\n{F}yaml\nuse: regex_present\npath: a\n{F}\n", "`pattern` is required"),
        (f"### p — py\n\n{F}python\nprint(1)\n{F}\n", "```python block is not a check"),
        (f"### t — slow\n\n{F}yaml\nuse: file_exists\npath: a\ntimeout_sec: 901\n{F}\n", "must be 1 to 900"),
        (f"### a — agent\n\n{F}agent executor=jetty\nx\n{F}\n", "executor=jetty is not allowed"),
        (
            f"### x — x\n\n{F}bash\ntrue\n{F}\n### x — again\n\n{F}bash\ntrue\n{F}\n",
            "two checks have the id 'x'",
        ),
    ],
)
def test_a_heading_pier_cannot_use_is_an_error_check(section, problem):
    checks = compiled(f"## Code Checks\n\n{section}").checks
    bad = [c for c in checks if isinstance(c, InvalidCheck)]
    assert bad and problem in bad[0].problem
    assert not bad[0].runs_here or bad[0].runner == "jetty"


def test_headings_inside_fences_and_other_sections_are_not_checks():
    body = (
        f"## Code Checks\n\n{F}markdown\n### fake — in a fence\n{F}\n\n## Other\n\n### other — not a check\n"
    )
    assert compiled(body).checks == ()


def test_code_checks_settings_are_validated():
    with pytest.raises(InputError, match="timeout_sec"):
        code_checks_config({"timeout_sec": 901})
    with pytest.raises(InputError, match="executor"):
        code_checks_config({"executor": "someone"})
    with pytest.raises(InputError, match="https://"):
        code_checks_config({"sources": [{"name": "c", "type": "git", "url": "git@github.com:a/b"}]})
    with pytest.raises(InputError, match="not a key of code_checks"):
        code_checks_config({"runner": "x"})
    config = code_checks_config(
        {"sources": [{"name": "c", "type": "git", "url": "https://h/r.git", "ref": "v1"}]}
    )
    assert config.sources[0].ref == "v1" and config.executor == "jetty"


def test_the_script_agent_runs_steps_only():
    assert shell_blocks(BODY) == ["echo step-one", "echo step-two"]


def test_the_note_names_who_runs_what():
    note = agent_note(compiled().checks)
    assert "You run these checks" in note and "look, mine" in note
    assert "do not run them and write no report entries for them: outputs-exist, size" in note
    assert agent_note(()) == ""
    assert "you may read: https://docs.example/spec" in agent_note(
        compiled().checks, ("https://docs.example/spec",)
    )


def test_placeholders_are_filled_in_every_check_field():
    names = {
        "results_dir": "/app/results",
        "checks_dir": "/app/checks",
        "assets_dir": "/app/assets",
        "n": "7",
    }
    raw = ({"name": "c", "type": "regex", "path": "{{results_dir}}/a.md", "pattern": "n={{n}} {{nope}}"},)
    body = f"## Code Checks\n\n### k — k\n\n{F}bash\npython {{{{checks_dir}}}}/x/run.py {{{{assets_dir}}}} {{{{n}}}}\n{F}\n"
    planned = plan_checks(raw, CodeChecksConfig(), body, names, None)
    own, command = planned.checks
    assert own.path == "a.md" and own.pattern == "n=7 {{nope}}"
    assert command.run == "python /app/checks/x/run.py /app/assets 7"
    assert any("checks[0].pattern: {{nope}} is not filled" in w for w in planned.warnings)


def test_one_id_in_both_forms_is_refused():
    body = f"## Code Checks\n\n### c — c\n\n{F}bash\ntrue\n{F}\n"
    with pytest.raises(InputError, match="a `checks:` entry and a `## Code Checks` heading have this id"):
        plan_checks(({"name": "c", "type": "file_exists", "path": "a"},), CodeChecksConfig(), body, {}, None)


def test_checks_entries_cannot_claim_the_platforms_fields():
    with pytest.raises(InputError, match="belongs to the checks of a `## Code Checks` section"):
        plan_checks(({"name": "c", "type": "command", "run": "true"},), CodeChecksConfig(), "", {}, None)
    with pytest.raises(InputError, match="`runner`"):
        plan_checks(
            ({"name": "c", "type": "file_exists", "path": "a", "runner": "agent"},),
            CodeChecksConfig(),
            "",
            {},
            None,
        )


# --- the merge


def result(name: str, status: str, output: str = "") -> CheckResult:
    return CheckResult(name=name, type="command", passed=status == "pass", exit_code=0 if status == "pass" else 1,
                       output=output, status=status, message=output)  # fmt: skip


def test_the_merge_replaces_drops_and_fills_in():
    checks = compiled().checks
    agent = {
        "version": 2,
        "verdict": "pass",
        "checks": [
            {"kind": "step", "id": "s", "status": "pass"},
            {"kind": "code_check", "id": "outputs-exist", "status": "pass", "message": "agent's"},
            {"kind": "code_check", "id": "ghost", "status": "fail"},
            {"kind": "code_check", "id": "look", "status": "pass", "message": "renders"},
        ],
    }
    ran = [result("outputs-exist", "fail", "no a.txt"), result("size", "pass")]
    merged = merge_report(agent, checks, ran)
    ids = [(e["kind"], e["id"]) for e in merged.report["checks"]]
    assert ids == [("step", "s"), ("code_check", "outputs-exist"), ("code_check", "size"),
                   ("code_check", "look"), ("code_check", "mine")]  # fmt: skip
    entry = merged.report["checks"][1]
    assert (
        entry["status"] == "fail" and entry["details"]["runner"] == "jetty" and entry["message"] == "no a.txt"
    )
    assert merged.report["checks"][4]["status"] == "skipped"
    assert merged.report["verdict"] == "fail" and merged.report["agent_verdict"] == "pass"
    assert [r.outcome for r in merged.results] == ["fail", "pass", "pass", "skipped"]
    assert any("ghost was dropped" in n for n in merged.notes)
    assert any("outputs-exist was replaced" in n for n in merged.notes)
    assert merged.summary()["failed"] == ["code_check:outputs-exist"]


def test_strict_makes_an_unreported_agent_check_an_error():
    checks = compiled().checks
    ran = [result("outputs-exist", "pass"), result("size", "pass")]
    assert merge_report(None, checks, ran).passed is True
    strict = merge_report(None, checks, ran, strict=True)
    assert strict.passed is False and {r.name for r in strict.results if r.outcome == "error"} == {
        "look",
        "mine",
    }


@pytest.mark.parametrize("kind", ["step", "checklist"])
def test_a_failed_step_or_checklist_entry_fails_the_verdict(kind):
    merged = merge_report({"version": 2, "checks": [{"kind": kind, "id": "x", "status": "fail"}]}, (), [])
    assert merged.passed is False and merged.summary()["verdict"] == "FAIL"


def test_judges_are_scored_against_their_threshold_and_mirrors_derived():
    agent = {"version": 2, "checks": [
        {"kind": "judge", "id": "a", "status": "pass", "score": 2, "threshold": 3},
        {"kind": "judge", "id": "b", "status": "fail", "score": 5, "threshold": 3},
        {"kind": "step", "id": "s", "status": "pass", "message": "m"},
        {"kind": "checklist", "id": "c", "status": "maybe"},
    ]}  # fmt: skip
    merged = merge_report(agent, (), [], evaluation="rubric")
    statuses = {e["id"]: e["status"] for e in merged.report["checks"]}
    assert statuses == {"a": "fail", "b": "pass", "s": "pass", "c": "error"}
    assert merged.report["overall_score"] == 3.5 and merged.report["pass_threshold"] == 4.0
    assert merged.report["stages"] == [{"name": "s", "passed": True, "message": "m"}]
    assert merged.report["rubric_scores"]["b"]["score"] == 5


# --- secret exposure


def decls(**extra: dict) -> dict:
    return {"TOKEN": {"env": "GH"}, "OTHER": {}, **extra}


def test_a_secret_a_source_names_is_withheld_from_the_agent():
    config = code_checks_config({"sources": [{"name": "c", "url": "https://h/r.git", "secret": "TOKEN"}]})
    seen = exposure(decls(), config, {}, secret_variable)
    assert seen.withheld == {"GH"} and seen.to_checks == {"OTHER"} and seen.consumed == {"GH": "source c"}


def test_expose_flags_override_the_defaults():
    config = code_checks_config({"sources": [{"name": "c", "url": "https://h/r.git", "secret": "TOKEN"}]})
    both = decls(
        TOKEN={"env": "GH", "expose_to_agent": True},
        OTHER={"expose_to_agent": False, "expose_to_checks": True},
    )
    seen = exposure(both, config, {}, secret_variable)
    assert seen.withheld == {"OTHER"} and seen.to_checks == {"GH", "OTHER"}


def test_an_mcp_server_that_names_a_secret_consumes_it():
    seen = exposure(
        decls(), CodeChecksConfig(), {"gh": {"url": "https://x", "secret": "OTHER"}}, secret_variable
    )
    assert seen.withheld == {"OTHER"}


def test_a_secret_not_declared_is_refused():
    config = code_checks_config({"sources": [{"name": "c", "url": "https://h/r.git", "secret": "NOPE"}]})
    with pytest.raises(InputError, match="'NOPE' is not declared under secrets"):
        exposure(decls(), config, {}, secret_variable)


# --- the defaults the platform applies


@pytest.mark.parametrize(
    ("model", "agent"),
    [
        ("claude-sonnet-4-6", "claude-code"),
        ("anthropic/claude-sonnet-4.6", "claude-code"),
        ("gpt-5.5", "codex"),
        ("o3-mini", "codex"),
        ("o4-mini", "codex"),
        ("o1-preview", "codex"),
        ("gemini-2.5-pro", "gemini-cli"),
        ("gemini/gemini-2.5-flash", "gemini-cli"),
        ("mistral-large", None),
    ],
)
def test_the_agent_is_inferred_from_the_model(model, agent):
    assert infer_agent(model) == agent


def test_python312_uv_node_is_the_same_snapshot_as_python312_uv():
    catalog = SnapshotCatalog(Settings())
    node, plain = catalog.get("python312-uv-node"), catalog.get("python312-uv")
    assert node is not None and "python312-uv-node" in catalog
    assert catalog.image_ref(node) == catalog.image_ref(plain)


def test_command_checks_take_no_source_fields():
    with pytest.raises(Exception, match="source"):
        validate_check({"name": "c", "type": "command", "run": "true", "source": "x"})


def test_an_experiments_score_counts_the_checks_that_ran():
    from pier.experiments.results import score
    from pier.record import RunStatus, Trajectory, utcnow

    record = Trajectory.new("r1", "c", "t")
    record.outputs.checks = [result("a", "pass"), result("b", "fail"), result("c", "skipped")]
    record.finish(RunStatus.completed, utcnow(), 1.0)
    assert score(record) == 0.5
    assert record.success is False
    record.outputs.checks = [result("a", "pass"), result("c", "skipped")]
    record.finish(RunStatus.completed, utcnow(), 1.0)
    assert score(record) == 1.0 and record.success is True, "a skipped check fails nothing"


def test_an_mcp_server_gets_the_secret_it_names_and_the_agents_config_not_the_name():
    from pier.lifecycle.evaluation import consumed_by_servers

    servers = {"gh": {"url": "https://mcp.example/x", "secret": "OTHER"},
               "local": {"command": "srv", "secret": "TOKEN"}, "plain": {"command": "p"}}  # fmt: skip
    out = consumed_by_servers(servers, decls(), {"OTHER": "o-value", "GH": "t-value"}, secret_variable)
    assert out["gh"] == {"url": "https://mcp.example/x", "headers": {"Authorization": "Bearer o-value"}}
    assert out["local"] == {"command": "srv", "env": {"GH": "t-value"}}
    assert out["plain"] == {"command": "p"}


def test_code_checks_mcp_servers_join_the_runs_and_the_runs_own_win(tmp_path):
    """code_checks.mcp_servers are merged into the run's MCP servers (a server of
    the same name in the runbook's mcp_servers wins); a run's code_checks of
    {"timeout_sec": 30} keeps the runbook's servers and executor (per key)."""
    from pier.lifecycle.plan import RunInputs, plan_run
    from pier.runbook import parse
    from pier.settings import Settings
    from pier.tasks import task_from_runbook

    text = (
        "---\nagent: script\n"
        "mcp_servers: {shared: {command: runbooks-own}}\n"
        "code_checks:\n  executor: agent\n  timeout_sec: 120\n"
        "  mcp_servers: {judge: {command: judge-srv}, shared: {command: checks-one}}\n"
        "---\n# t\n\n```bash\ntrue\n```\n"
    )
    task = task_from_runbook(parse(text))
    settings = Settings(home=tmp_path / "home", ca_bundle=None)
    inputs = RunInputs(trajectory_id="a" * 32, collection="c", task="t")
    plan = plan_run(task, {"code_checks": {"timeout_sec": 30}}, inputs, settings)[1]
    assert plan.mcp_servers == {"judge": {"command": "judge-srv"}, "shared": {"command": "runbooks-own"}}
    assert (plan.code_checks.executor, plan.code_checks.timeout_sec) == ("agent", 30)
