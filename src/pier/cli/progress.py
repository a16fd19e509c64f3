"""`pier run`'s live view: a line per stage as it ends, the agent's output as it
comes, and a spinner naming the stage in progress."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from pier.cli.console import terminal_safe
from pier.lifecycle.start import Observer, RunRequest
from pier.record import StageRecord, StageStatus

LABELS = {
    "prepare": "Prepare",
    "create": "Create sandbox",
    "setup": "Set up",
    "run_agent": "Run agent",
    "cleanup_credentials": "Clean up credentials",
    "collect": "Collect",
    "check": "Check",
    "save": "Save and delete",
}
MARKS = {StageStatus.completed: "[green]✓[/green]", StageStatus.failed: "[red]✗[/red]"}


class Progress:
    def __init__(self, console: Console):
        self.console = console
        self.status: Status | None = None

    def observer(self) -> Observer:
        return Observer(on_log=self.on_log, on_step=self.on_step)

    def start(self, request: RunRequest) -> None:
        self.console.print(
            f"[bold]pier run[/bold] {escape(request.collection)}/{escape(request.task_name)} "
            f"[dim]{request.trajectory_id}[/dim]"
        )
        self.status = self.console.status("starting", spinner="dots")
        self.status.start()

    def on_step(self, step: StageRecord) -> None:
        label = LABELS.get(step.name, step.name)
        if step.status == StageStatus.running:
            if self.status:
                self.status.update(f"{label} …")
            return
        mark = MARKS.get(step.status)
        if mark:
            self.console.print(f"{mark} {label} [dim]{step.duration_seconds or 0:.1f}s[/dim]")

    def on_log(self, stage: str, line: str) -> None:
        style = "yellow" if line.startswith("warning:") else ("" if stage == "run_agent" else "dim")
        text = escape(terminal_safe(line))
        self.console.print(
            f"    [{style}]{text}[/{style}]" if style else f"    {text}", highlight=False, soft_wrap=True
        )

    def stop(self) -> None:
        if self.status:
            self.status.stop()
