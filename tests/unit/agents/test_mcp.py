import tomllib

import pytest

from pier.agents.mcp import (
    claude_config,
    codex_toml,
    gemini_config,
    hermes_config,
    mcp_servers,
    opencode_config,
)
from pier.errors import InputError

RAW = {
    "files": {"command": "npx", "args": ["-y", "@mcp/fs", "/app"], "env": {"TOKEN": "t0k3n"}},
    "web": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer x"}},
    "old": {"url": "https://mcp.example/sse", "type": "sse"},
}


def test_each_cli_format():
    servers = mcp_servers(RAW)
    claude = claude_config(servers)["mcpServers"]
    assert claude["files"] == {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "@mcp/fs", "/app"],
        "env": {"TOKEN": "t0k3n"},
    }
    assert claude["web"]["type"] == "http" and claude["old"]["type"] == "sse"
    gemini = gemini_config(servers)
    assert gemini["web"]["httpUrl"] == "https://mcp.example/mcp" and gemini["old"] == {
        "url": "https://mcp.example/sse"
    }
    opencode = opencode_config(servers)
    assert (
        opencode["files"]["command"] == ["npx", "-y", "@mcp/fs", "/app"]
        and opencode["files"]["type"] == "local"
    )
    assert opencode["web"]["type"] == "remote"
    assert hermes_config(servers)["web"] == {
        "url": "https://mcp.example/mcp",
        "headers": {"Authorization": "Bearer x"},
    }


def test_codex_toml_parses_back():
    toml = tomllib.loads(codex_toml(mcp_servers(RAW)))["mcp_servers"]
    assert toml["files"] == {"command": "npx", "args": ["-y", "@mcp/fs", "/app"], "env": {"TOKEN": "t0k3n"}}
    assert toml["web"] == {"url": "https://mcp.example/mcp", "http_headers": {"Authorization": "Bearer x"}}


@pytest.mark.parametrize(
    "bad",
    [
        {"args": ["x"]},
        {"command": "a", "url": "b"},
        {"url": "u", "type": "ws"},
        {"command": "a", "args": "x"},
        "npx",
    ],
)
def test_malformed_servers_are_named(bad):
    with pytest.raises(InputError, match=r"mcp_servers\.broken"):
        mcp_servers({"broken": bad})
