"""What the scripted model says, whatever API it is asked through: on the first
turn a tool call (the CLI's own file-writing tool when it offers one, else its
shell tool) that writes ANSWER_PATH; once a tool result comes back, a final
message. Requests without tools (titles, quota probes) get a short text."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

ANSWER_PATH = "/app/results/answer.md"
ANSWER_TEXT = "# Answer\n\nforty-two, written by the agent's own tool\n"
FINAL_TEXT = "Done: the answer is in /app/results/answer.md."
WRITE_TOOLS = ("Write", "write", "write_file", "WriteFile", "create_file")
SHELL_TOOLS = ("shell", "exec_command", "shell_command", "Bash", "bash", "run_shell_command", "terminal")
PATH_KEYS = ("file_path", "filePath", "absolute_path", "path")
CONTENT_KEYS = ("content", "contents", "text", "file_text")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = "call_pier_1"

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Text:
    text: str


Turn = ToolCall | Text


def next_turn(tools: dict[str, dict], has_tool_result: bool) -> Turn:
    """tools: name -> JSON schema of its parameters (empty when unknown)."""
    if has_tool_result:
        return Text(FINAL_TEXT)
    for name in WRITE_TOOLS:
        if name in tools:
            return ToolCall(name, _write_args(tools[name]))
    for name in SHELL_TOOLS:
        if name in tools:
            return ToolCall(name, _shell_args(tools[name]))
    return Text("ok")


def _write_args(schema: dict) -> dict[str, Any]:
    props = schema.get("properties") or {}
    path_key = next((k for k in PATH_KEYS if k in props), "file_path")
    content_key = next((k for k in CONTENT_KEYS if k in props), "content")
    return {path_key: ANSWER_PATH, content_key: ANSWER_TEXT}


def shell_command() -> str:
    return f"mkdir -p /app/results && printf %s {shlex.quote(ANSWER_TEXT)} > {ANSWER_PATH}"


def _shell_args(schema: dict) -> dict[str, Any]:
    props = schema.get("properties") or {}
    if "cmd" in props:
        return {"cmd": shell_command()}
    command = props.get("command", {})
    if command.get("type") == "array":
        return {"command": ["bash", "-lc", shell_command()]}
    return {"command": shell_command()}
