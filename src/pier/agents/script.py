"""The built-in `script` agent: runs the runbook's fenced bash/sh blocks in order, in
one `bash -euo pipefail` process, so the first failing command fails the run."""

from __future__ import annotations

import re
import shlex

from pier.agents.base import AGENT_LOG, PIER_RUN_DIR, Agent, AgentLaunch, AgentPlan, ProviderRoute
from pier.errors import InputError
from pier.sandbox.processes import stop_leftovers_after, through_term

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
SHELL_LANGS = frozenset({"bash", "sh", "shell"})
SCRIPT_PATH = f"{PIER_RUN_DIR}/script.sh"


def shell_blocks(markdown: str) -> list[str]:
    """The bodies of fenced code blocks whose info string names bash or sh."""
    blocks: list[str] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        match = _FENCE_OPEN.match(lines[index])
        if not match:
            index += 1
            continue
        fence = match.group("fence")
        lang = (match.group("info").split() or [""])[0].lower()
        body, index = _read_block(lines, index + 1, fence)
        if lang in SHELL_LANGS:
            blocks.append(body)
    return blocks


def _read_block(lines: list[str], start: int, fence: str) -> tuple[str, int]:
    closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            return "\n".join(lines[start:index]), index + 1
    return "\n".join(lines[start:]), len(lines)


def build_script(markdown: str) -> str:
    blocks = shell_blocks(markdown)
    if not blocks:
        raise InputError(
            "the script agent found no ```bash or ```sh block in the runbook: "
            "add one, or choose a model-driven agent"
        )
    parts = ["cd /app"]
    for number, block in enumerate(blocks, 1):
        parts.append(f"# --- block {number} ---\n{block}")
    return "\n".join(parts) + "\n"


class ScriptAgent(Agent):
    name = "script"
    needs_model = False

    def preflight(self, plan: AgentPlan) -> None:
        build_script(plan.instruction)  # a runbook without a shell block is refused before any sandbox

    def launch(self, plan: AgentPlan, route: ProviderRoute | None = None) -> AgentLaunch:
        script = build_script(plan.instruction)
        # The agent ends when its script does: what it left running is stopped then.
        script_run = stop_leftovers_after(f"bash -euo pipefail {shlex.quote(SCRIPT_PATH)}")
        tee = through_term(f"tee -a {shlex.quote(AGENT_LOG)}")
        command = f"set -o pipefail; {script_run} 2>&1 | {tee}"
        return AgentLaunch(command=command, files={SCRIPT_PATH: script.encode()})
