"""The built-in `script` agent: runs the runbook's fenced bash/sh blocks in order, in
one `bash -euo pipefail` process, so the first failing command fails the run. The
blocks of `## Code Checks` and of the report's template are not steps: skipped."""

from __future__ import annotations

import shlex

from pier.agents.base import AGENT_LOG, PIER_RUN_DIR, Agent, AgentLaunch, AgentPlan, ProviderRoute
from pier.errors import InputError
from pier.runbook.sections import fences, is_code_checks, is_report_section
from pier.sandbox.processes import stop_leftovers_after, through_term

SHELL_LANGS = frozenset({"bash", "sh", "shell"})
SCRIPT_PATH = f"{PIER_RUN_DIR}/script.sh"


def shell_blocks(markdown: str) -> list[str]:
    """The bodies of the steps' fenced bash/sh blocks: never those of the
    `## Code Checks` section (the checks, run after the agent) or of the section
    that shows how to write validation_report.json (the report's template)."""
    return [
        block.body
        for block in fences(markdown)
        if block.lang in SHELL_LANGS
        and not is_code_checks(block.section)
        and not is_report_section(block.section)
    ]


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
