"""The real agent CLIs, installed by pier, complete a runbook in a sandbox against
the scripted model server: the file is written by the CLI's own tool, the server
saw the model, key and path each CLI is meant to send, and the key is nowhere in
what pier keeps."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field

import pytest
from tests.support.model_script import ANSWER_PATH, ANSWER_TEXT
from tests.support.runs import run_folder

from pier.gateway.usage import is_generation
from pier.lifecycle import runner
from pier.lifecycle.context import RunContext
from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration
QUESTION = "What is six times seven? Write the answer to {{results_dir}}/answer.md."


@dataclass(frozen=True)
class Case:
    agent: str
    model: str
    key_env: str
    base_env: str
    base_suffix: str  # what the endpoint variable adds to the server's root
    path: str  # where the CLI's model calls land
    sent_model: str
    tool: str  # the CLI's own tool the script calls
    provider: str | None = None
    api_calls: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.agent}-{self.provider or 'default'}"


CASES = [
    Case("claude-code", "claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "", "/v1/messages",
         "claude-sonnet-4-5", "Write", api_calls=2),
    Case("claude-code", "anthropic/claude-sonnet-4.5", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "/api/v1",
         "/api/v1/messages", "anthropic/claude-sonnet-4.5", "Write", provider="openrouter", api_calls=2),
    Case("codex", "gpt-5.1-codex", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1", "/v1/responses",
         "gpt-5.1-codex", "exec_command"),
    Case("codex", "gpt-5.1-codex", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "/api/v1", "/api/v1/responses",
         "openai/gpt-5.1-codex", "exec_command", provider="openrouter"),
    Case("opencode", "anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "", "/v1/messages",
         "claude-sonnet-4-5", "write", api_calls=2),
    Case("gemini-cli", "gemini-2.5-pro", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "",
         "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", "write_file"),
    Case("hermes", "anthropic/claude-sonnet-4.5", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "/api/v1",
         "/api/v1/chat/completions", "anthropic/claude-sonnet-4.5", "write_file", api_calls=2),
]  # fmt: skip


# How the tool call (hermes: the final answer, all its one-shot mode prints)
# reads in the run log.
LOG_MARKERS = {"claude-code": "tool Write(file_path=/app/results/answer.md", "codex": "$ /bin/bash -lc",
               "opencode": "tool write(filePath=/app/results/answer.md",
               "gemini-cli": "tool write_file(file_path=/app/results/answer.md", "hermes": "Done: the answer"}  # fmt: skip


def runbook_text(case: Case) -> str:
    front = {"agent": case.agent, "model": case.model, "snapshot": "", "primary_outputs": ["answer.md"],
             "checks": [{"name": "answer", "type": "file_exists", "path": "answer.md"}]}  # fmt: skip
    if case.provider:
        front["model_provider"] = case.provider
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# Answer\n\n{QUESTION}\n"


def start(text: str, image: str, env: dict[str, str]) -> Trajectory:
    task = task_from_runbook(parse(text))
    params = {"snapshot": "", "image": image}
    request = RunRequest(collection="agents", task_name="answer", task=task, run_params=params, env=env)
    return run(Services(get_settings()), request)


def probe_after_cleanup(monkeypatch: pytest.MonkeyPatch, command: str) -> list[str]:
    """Runs command in the sandbox where checks would run (right after clean up),
    and gives back its output."""
    seen: list[str] = []
    stages = dict(runner.STAGES)
    collect = stages["collect"]

    def probing_collect(ctx: RunContext) -> None:
        seen.append(ctx.require_sandbox().exec(command, workdir="/", timeout=120).output)
        collect(ctx)

    monkeypatch.setattr(
        runner, "STAGES", tuple((n, probing_collect if n == "collect" else s) for n, s in stages.items())
    )
    return seen


@dataclass
class Probe:
    """What a probe saw inside the sandbox while the CLI waited on its first model call."""

    token: str = ""
    key_found: str | None = None  # where the provider key was found, if anywhere
    token_in_environ: bool = False  # the probe did see the live agent's environment


def probe_while_agent_runs(monkeypatch: pytest.MonkeyPatch, model_server, key: str) -> Probe:
    """On the CLI's first model call (the agent is live and waiting for the answer),
    looks for the provider key in the sandbox: every process's environment, the
    probe's own environment, and every file written since the sandbox started."""
    probe, holder = Probe(), {}
    lock = threading.Lock()
    setup = dict(runner.STAGES)["setup"]

    def capturing_setup(ctx: RunContext) -> None:
        setup(ctx)
        holder["sandbox"] = ctx.require_sandbox()
        probe.token = ctx.model_route.grant.token if ctx.model_route and ctx.model_route.grant else ""

    def on_model_call(_item) -> None:
        with lock:
            if "done" in holder or "sandbox" not in holder:
                return
            holder["done"] = True
        sandbox = holder["sandbox"]
        where = {
            "environment": "env | grep -F -- {s}",
            "/proc/*/environ": "grep -lsF -- {s} /proc/[0-9]*/environ",
            "files": r"find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -newer /proc/1 "
            "-print0 2>/dev/null | xargs -0 -r grep -lsF -- {s}",
        }
        for name, command in where.items():
            found = sandbox.exec(command.format(s=key), workdir="/", timeout=300).output.strip()
            if found:
                probe.key_found = f"{name}: {found[:300]}"
        environ = sandbox.exec(f"grep -lsF -- {probe.token} /proc/[0-9]*/environ", workdir="/", timeout=60)
        probe.token_in_environ = bool(probe.token) and bool(environ.output.strip())

    monkeypatch.setattr(
        runner, "STAGES", tuple((n, capturing_setup if n == "setup" else s) for n, s in runner.STAGES)
    )
    monkeypatch.setattr(model_server, "on_model_call", on_model_call)
    return probe


def files_holding(secret: str) -> str:
    """A command listing every file written since the sandbox started that holds
    secret (anything older is the image's), and /run/pier if it is still there."""
    return (
        r"find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -newer /proc/1 -print0 "
        f"2>/dev/null | xargs -0 -r grep -lsF -- {secret}; ls -d /run/pier 2>/dev/null; true"
    )


def stored_text(record: Trajectory) -> str:
    """Everything pier keeps about a run: the record, its log, its stored files."""
    events = Services(get_settings()).store.events(record.trajectory_id)
    parts = [record.model_dump_json(), *(e.line for e in events)]
    for file in run_folder(record).rglob("*"):
        if file.is_file():
            parts.append(file.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_agent_cli_completes_a_runbook_against_the_scripted_model(
    case, agent_image, model_server, monkeypatch
):
    key = f"sk-pier-test-{case.agent}-{uuid.uuid4().hex}"
    env = {case.key_env: key, case.base_env: model_server.url + case.base_suffix}
    leftovers = probe_after_cleanup(monkeypatch, files_holding(key))
    probe = probe_while_agent_runs(monkeypatch, model_server, key)

    record = start(runbook_text(case), agent_image, env)

    assert record.success, (record.error, [r.path for r in model_server.requests])
    results = run_folder(record) / "results"
    assert (results / "answer.md").read_text() == ANSWER_TEXT
    assert record.outputs.primary_files == ["answer.md"]
    assert [(c.name, c.passed) for c in record.outputs.checks] == [("answer", True)]

    calls = model_server.model_calls()
    assert calls, "the CLI never called the model"
    main = [c for c in calls if c.path == case.path]
    assert main, f"no call to {case.path}: {[c.path for c in calls]}"
    tool_turns = [c for c in main if c.answered == case.tool]
    assert tool_turns, "the script's tool call never went out"
    assert {c.model for c in tool_turns} == {case.sent_model}
    # The provider saw the real key on every request; the sandbox never held it.
    assert {r.credential for r in model_server.requests} == {key}
    assert probe.key_found is None, probe.key_found
    assert probe.token.startswith("pier-run-") and probe.token_in_environ, probe
    assert any("six times seven" in json.dumps(c.body) for c in main), "the runbook never reached the model"

    logs = run_folder(record) / "logs"
    transcripts = [f for f in logs.rglob("*") if f.is_file() and ANSWER_PATH in f.read_text(errors="replace")]
    assert any(case.tool in f.read_text(errors="replace") for f in transcripts), sorted(
        map(str, logs.rglob("*"))
    )

    run_log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    marker = LOG_MARKERS[case.agent]
    assert any(line.startswith(marker) for line in run_log), "the run log lacks the readable stream"

    assert key not in stored_text(record)
    assert leftovers == [""], f"credentials left where checks would run: {leftovers}"

    # The record's usage is the gateway's: every call counted, for CLIs that
    # report usage and those that do not; the CLI's own figures beside it.
    usage = record.outputs.usage
    generations = [c for c in calls if is_generation(c.path)]
    seen = usage["gateway"]
    assert usage["source"] == "gateway" and usage["duration_seconds"] > 0
    assert seen["requests"] == usage["requests"] == len(model_server.requests)
    assert seen["api_calls"] == usage["api_calls"] == len(generations) >= 2
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (
        100 * len(generations),
        20 * len(generations),
        120 * len(generations),
    )
    assert usage["cost_usd"] == seen["cost_usd"] > 0 and usage["cost_source"] == "price table"
    reported = usage.get("agent_reported")
    if case.api_calls is not None:  # a CLI that reports its usage: kept beside, never summed
        assert reported is not None and reported["api_calls"] == case.api_calls, usage
        assert reported["prompt_tokens"] == 100 * case.api_calls


@pytest.mark.parametrize("case", [CASES[0], CASES[2]], ids=lambda c: c.id)
def test_a_model_budget_stops_the_agent_and_fails_the_run(case, agent_image, model_server):
    """The first answer spends 120 tokens of a 100-token budget: the next request
    is refused by the gateway, the CLI is told why, and the run fails saying so."""
    key = f"sk-pier-test-{uuid.uuid4().hex}"
    env = {case.key_env: key, case.base_env: model_server.url + case.base_suffix}
    text = runbook_text(case).replace("---\n#", "model_budget: {tokens: 100}\n---\n#", 1)

    record = start(text, agent_image, env)

    assert not record.success and record.error is not None
    assert record.failed_stage == "run_agent"
    assert "model budget was used up (120 tokens used, budget 100)" in record.error
    assert len([c for c in model_server.model_calls() if is_generation(c.path)]) == 1
    assert record.outputs.usage["gateway"]["total_tokens"] == 120
    agent_logs = run_folder(record) / "logs"
    said = [
        f
        for f in agent_logs.rglob("*")
        if f.is_file() and "budget is used up" in f.read_text(errors="replace")
    ]
    assert said, "the CLI never showed the gateway's refusal"


@pytest.mark.parametrize("case", [CASES[0], CASES[5]], ids=lambda c: c.id)
def test_with_an_empty_allow_list_the_agent_still_reaches_its_model(case, agent_image, model_server):
    """network: {allow: []}: nothing gets out but the model gateway, which the CLI
    reaches on the internal network; the provider is still reached (from the host)."""
    key = f"sk-pier-test-{uuid.uuid4().hex}"
    env = {case.key_env: key, case.base_env: model_server.url + case.base_suffix}
    text = runbook_text(case).replace("---\n#", "network: {allow: []}\n---\n#", 1)

    record = start(text, agent_image, env)

    assert record.success, (record.error, [r.path for r in model_server.requests])
    assert {r.credential for r in model_server.requests} == {key}
    assert record.outputs.usage["gateway"]["api_calls"] >= 2
    log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    assert any(line.startswith("egress: only through pier's proxy, to nothing") for line in log)
