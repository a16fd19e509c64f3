"""MCP servers from init_params.mcp_servers (name -> {command, args, env} or
{url, headers, type}) in each CLI's own configuration format."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pier.errors import InputError


@dataclass(frozen=True)
class McpServer:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = "http"  # for url servers: http (streamable) or sse

    @property
    def remote(self) -> bool:
        return self.url is not None


def mcp_servers(raw: Mapping[str, Any]) -> list[McpServer]:
    """Validated servers. Raises InputError naming the server that is malformed."""
    return [_server(name, spec) for name, spec in raw.items()]


def _server(name: str, spec: Any) -> McpServer:
    if not isinstance(spec, Mapping) or bool(spec.get("command")) == bool(spec.get("url")):
        raise InputError(f"mcp_servers.{name}: give either `command` (with optional args, env) or `url`")
    transport = str(spec.get("type") or spec.get("transport") or "http").lower()
    if transport not in ("http", "sse", "stdio", "streamable-http", "streamable_http"):
        raise InputError(f"mcp_servers.{name}: type '{transport}' is not one of stdio, http, sse")
    args = spec.get("args") or []
    if not isinstance(args, list):
        raise InputError(f"mcp_servers.{name}: args must be a list")
    return McpServer(
        name=name,
        command=str(spec["command"]) if spec.get("command") else None,
        args=tuple(str(a) for a in args),
        env={str(k): str(v) for k, v in (spec.get("env") or {}).items()},
        url=str(spec["url"]) if spec.get("url") else None,
        headers={str(k): str(v) for k, v in (spec.get("headers") or {}).items()},
        transport="sse" if transport == "sse" else "http",
    )


def claude_config(servers: list[McpServer]) -> dict:
    """claude-code --mcp-config: {"mcpServers": {...}}."""
    entries: dict[str, dict[str, Any]] = {}
    for s in servers:
        if s.remote:
            entries[s.name] = {
                "type": s.transport,
                "url": s.url,
                **({"headers": dict(s.headers)} if s.headers else {}),
            }
        else:
            entries[s.name] = {
                "type": "stdio",
                "command": s.command,
                "args": list(s.args),
                "env": dict(s.env),
            }
    return {"mcpServers": entries}


def gemini_config(servers: list[McpServer]) -> dict:
    """gemini-cli settings.json mcpServers (httpUrl for streamable HTTP, url for SSE)."""
    entries: dict[str, dict[str, Any]] = {}
    for s in servers:
        if s.remote:
            key = "url" if s.transport == "sse" else "httpUrl"
            entries[s.name] = {key: s.url, **({"headers": dict(s.headers)} if s.headers else {})}
        else:
            entries[s.name] = {"command": s.command, "args": list(s.args), "env": dict(s.env)}
    return entries


def opencode_config(servers: list[McpServer]) -> dict:
    """opencode.json "mcp": local servers take the command line as one list."""
    entries: dict[str, dict[str, Any]] = {}
    for s in servers:
        if s.remote:
            entries[s.name] = {"type": "remote", "url": s.url, "enabled": True, "headers": dict(s.headers)}
        else:
            entries[s.name] = {"type": "local", "command": [s.command, *s.args], "enabled": True,
                               "environment": dict(s.env)}  # fmt: skip
    return entries


def hermes_config(servers: list[McpServer]) -> dict:
    """hermes config.yaml mcp_servers."""
    entries: dict[str, dict] = {}
    for s in servers:
        if s.remote:
            entries[s.name] = {"url": s.url, **({"headers": dict(s.headers)} if s.headers else {})}
        else:
            entries[s.name] = {"command": s.command, "args": list(s.args), "env": dict(s.env)}
    return entries


def codex_toml(servers: list[McpServer]) -> str:
    """codex config.toml [mcp_servers.NAME] tables (streamable HTTP for url servers)."""
    blocks = []
    for s in servers:
        lines = [f"[mcp_servers.{toml_str(s.name)}]"]
        if s.remote:
            lines.append(f"url = {toml_str(s.url or '')}")
            if s.headers:
                lines.append(f"http_headers = {toml_table(s.headers)}")
        else:
            lines.append(f"command = {toml_str(s.command or '')}")
            lines.append(f"args = [{', '.join(toml_str(a) for a in s.args)}]")
            if s.env:
                lines.append(f"env = {toml_table(s.env)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes), given no raw control chars.
    return json.dumps(value)


def toml_table(values: Mapping[str, str]) -> str:
    return "{ " + ", ".join(f"{toml_str(k)} = {toml_str(v)}" for k, v in values.items()) + " }"
