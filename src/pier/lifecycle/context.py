"""What the stages share for one run."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pier.agents.base import Agent, AgentLaunch
from pier.agents.toolcalls import ToolUse
from pier.lifecycle.plan import RunInputs, RunPlan
from pier.lifecycle.pool import WarmPool
from pier.lifecycle.scratch import scratch_dir
from pier.record import StageRecord, Trajectory
from pier.redact import Redactor
from pier.sandbox.base import LayerRecipe, Sandbox, SandboxBackend, SandboxSource
from pier.settings import Settings
from pier.storage.base import RunStorage
from pier.tasks.model import Task

if TYPE_CHECKING:  # loaded by the stages that need them: a run without a model or allow-list never does
    from pier.db import Store
    from pier.egress.run import EgressRun
    from pier.gateway.grants import ProviderTrouble
    from pier.gateway.routing import ModelRoute
    from pier.lifecycle.workflow import Children

# (stage, line): a human line for the run's log.
LogSink = Callable[[str, str], None]


@dataclass
class LogBudget:
    """How much of the agent's output the run's log has stored, and dropped."""

    stored: int = 0
    dropped_bytes: int = 0
    dropped_lines: int = 0
    said: bool = False


@dataclass
class RunContext:
    task: Task
    run_params: dict
    inputs: RunInputs
    record: Trajectory
    settings: Settings
    backend: SandboxBackend
    output_dir: Path  # the run's local scratch folder: collect, redaction and checks work here
    emit: LogSink  # store + console, already redacted by `log`
    # what it returns (whether the store wrote: a run made final elsewhere stays) is unused here
    save_record: Callable[[Trajectory], object]
    redactor: Redactor = field(default_factory=Redactor)
    # Wait until what emit was given is stored (logwriter.py); never raises (a
    # failed write is raised at the next line).
    flush_log: Callable[[], None] = lambda: None
    cancel: threading.Event = field(default_factory=threading.Event)
    # a shutdown ended it (cancel is set too): it ends failed with this reason, as its stored record says
    stopped_as: str | None = None
    plan: RunPlan | None = None
    source: SandboxSource | None = None
    image: str | None = None
    agent_layer: str | None = None  # the image is this agent layer: the CLI is in it already
    image_labels: Mapping[str, str] = field(default_factory=dict)  # the run's image's own (pier.agents, ...)
    # No layer yet: the sandbox installs, then the layer of (image, recipe) is built in the background.
    layer_pending: tuple[str, LayerRecipe] | None = None
    sandbox: Sandbox | None = None
    agent: Agent | None = None
    launch: AgentLaunch | None = None
    agent_output: str = ""
    tool_calls: list[ToolUse] = field(default_factory=list)  # what the transcript showed, for the trace
    stage: str = "prepare"
    on_step: Callable[[StageRecord], None] | None = None  # a stage started or ended
    model_route: ModelRoute | None = None  # the run's way to its model through pier's gateway
    provider_trouble: ProviderTrouble | None = None  # the provider's refusal or failure the gateway saw
    egress: EgressRun | None = None  # the run's allow-listed way out, when it has one
    storage: RunStorage | None = None  # where output_dir is published; None keeps it where it is
    pool: WarmPool | None = None  # ready sandboxes create may claim (pier serve)
    store: Store | None = None  # the runs' records: a continued run reads and claims its parent's
    log_budget: LogBudget = field(default_factory=lambda: LogBudget())
    children: Children | None = None  # a workflow's fan-out starts its child runs here
    # A workflow taken over from a lost worker: what its unfinished steps had recorded, by step.
    resumed: dict = field(default_factory=dict)
    # A workflow's model budget, shared with its fan-outs' children (pier.lifecycle.workflow.Purse).
    purse: Any = None

    def publish(self) -> None:
        """Store what the scratch folder holds under the run's storage key, then
        empty it. Called by save, and again at the end for run.json."""
        if self.storage is None or not self.output_dir.is_dir():
            return
        self.storage.publish(self.output_dir, self.record.storage_path)
        shutil.rmtree(self.output_dir, ignore_errors=True)

    def log(self, line: str, stage: str | None = None) -> None:
        self.emit(stage or self.stage, self.redactor.text(line))

    def agent_line(self, line: str) -> None:
        """One line of the agent's output for the run's log: past
        PIER_MAX_LOG_BYTES of them it is dropped and counted (pier's own
        lines are always kept); the first dropped line is said once."""
        budget = self.log_budget
        size = len(line.encode("utf-8", errors="replace")) + 1
        if budget.stored + size <= self.settings.max_log_bytes and not budget.dropped_lines:
            budget.stored += size
            self.log(line, "run_agent")
            return
        if not budget.dropped_lines:
            self.log(
                f"the agent's output passed PIER_MAX_LOG_BYTES ({self.settings.max_log_bytes} bytes): what it "
                "prints from here on is not stored or streamed; the run's warnings say how much was dropped",
                "run_agent",
            )
        budget.dropped_lines += 1
        budget.dropped_bytes += size

    def say_log_cut(self) -> None:
        """The warning (log and record) of how much of the agent's output was dropped, once."""
        budget = self.log_budget
        if budget.dropped_lines and not budget.said:
            budget.said = True
            note = (
                f"the run's log was cut: {budget.dropped_bytes} bytes in {budget.dropped_lines} lines of the "
                f"agent's output were dropped past PIER_MAX_LOG_BYTES ({self.settings.max_log_bytes} bytes)"
            )
            self.log(f"warning: {note}", "run_agent")
            self.record.outputs.warnings.append(note)

    def scratch(self) -> Path:
        """This run's scratch folder, made on first use; execute removes it at the end."""
        folder = scratch_dir(self.settings, self.record.trajectory_id)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def require_plan(self) -> RunPlan:
        assert self.plan is not None, "prepare has not run"
        return self.plan

    def require_sandbox(self) -> Sandbox:
        assert self.sandbox is not None, "create has not run"
        return self.sandbox
