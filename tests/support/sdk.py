"""The platform's TypeScript client (@jetty/sdk) and its MCP server
(jetty-mcp-server), installed from the npm registry at the versions
tests/sdk/package-lock.json pins, for the compatibility suites. Without Node
the suites are skipped; under CI they fail."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support.services import require_service

SDK_DIR = Path(__file__).resolve().parents[1] / "sdk"
SUITE = SDK_DIR / "client_suite.mjs"
MCP_SUITE = SDK_DIR / "mcp_suite.mjs"
MIN_NODE = 18
INSTALL_TIMEOUT_SEC = 300


def _unavailable(reason: str) -> None:
    require_service("the SDK compatibility suite's Node and @jetty/sdk", f"{reason} (.ci/run installs them)")


def pinned_versions() -> dict[str, str]:
    return json.loads((SDK_DIR / "package.json").read_text())["dependencies"]


def installed_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in pinned_versions():
        manifest = SDK_DIR / "node_modules" / name / "package.json"
        found[name] = json.loads(manifest.read_text())["version"] if manifest.is_file() else None
    return found


def node() -> str:
    """The node binary, once every package tests/sdk pins is installed at its version."""
    binary, npm = shutil.which("node"), shutil.which("npm")
    if not binary or not npm:
        _unavailable("node and npm are not installed: apt-get install nodejs npm")
    major = subprocess.run(
        [binary, "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True
    )
    if major.returncode != 0 or int(major.stdout.strip() or 0) < MIN_NODE:
        _unavailable(f"node {major.stdout.strip()} is too old: @jetty/sdk needs Node {MIN_NODE}+")
    if installed_versions() != pinned_versions():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=SDK_DIR, capture_output=True, text=True,
            timeout=INSTALL_TIMEOUT_SEC,
        )  # fmt: skip
        if done.returncode != 0:
            _unavailable(f"npm ci in {SDK_DIR} failed:\n{done.stderr[-2000:]}")
    return binary
