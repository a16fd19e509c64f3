"""The real agent CLIs, installed by pier, complete a runbook in a sandbox against
the scripted model server: the file is written by the CLI's own tool, the server
saw the model, key and path each CLI is meant to send, and the key is nowhere in
what pier keeps."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

import pytest
from tests.support.model_script import ANSWER_PATH, ANSWER_TEXT
from tests.support.runs import run_folder

from pier.lifecycle import runner
from pier.lifecycle.context import RunContext
from pier.lifecycle.service import RunRequest, Services, run
from pier.record import RunRecord
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


def start(text: str, image: str, env: dict[str, str]) -> RunRecord:
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


def files_holding(secret: str) -> str:
    """A command listing every file written since the sandbox started that holds
    secret (anything older is the image's), and /run/pier if it is still there."""
    return (
        r"find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -newer /proc/1 -print0 "
        f"2>/dev/null | xargs -0 -r grep -lsF -- {secret}; ls -d /run/pier 2>/dev/null; true"
    )


def stored_text(record: RunRecord) -> str:
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
    assert {c.credential for c in calls} == {key}
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

    usage = record.outputs.usage
    assert usage["prompt_tokens"] == 200 and usage["completion_tokens"] == 40, usage
    assert usage["total_tokens"] == 240 and usage["duration_seconds"] > 0
    if case.api_calls is not None:
        assert usage["api_calls"] == case.api_calls
