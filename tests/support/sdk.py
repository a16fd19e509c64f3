"""The platform's TypeScript client (@jetty/sdk), installed from the npm
registry at the version tests/sdk/package-lock.json pins, for the
compatibility suite. Without Node the suite is skipped; under CI it fails."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support.services import require_service

SDK_DIR = Path(__file__).resolve().parents[1] / "sdk"
SUITE = SDK_DIR / "client_suite.mjs"
MIN_NODE = 18
INSTALL_TIMEOUT_SEC = 300


def _unavailable(reason: str) -> None:
    require_service("the SDK compatibility suite's Node and @jetty/sdk", f"{reason} (.ci/run installs them)")


def pinned_version() -> str:
    return json.loads((SDK_DIR / "package.json").read_text())["dependencies"]["@jetty/sdk"]


def installed_version() -> str | None:
    manifest = SDK_DIR / "node_modules" / "@jetty" / "sdk" / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.is_file() else None


def node() -> str:
    """The node binary, once @jetty/sdk is installed at the pinned version."""
    binary, npm = shutil.which("node"), shutil.which("npm")
    if not binary or not npm:
        _unavailable("node and npm are not installed: apt-get install nodejs npm")
    major = subprocess.run(
        [binary, "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True
    )
    if major.returncode != 0 or int(major.stdout.strip() or 0) < MIN_NODE:
        _unavailable(f"node {major.stdout.strip()} is too old: @jetty/sdk needs Node {MIN_NODE}+")
    if installed_version() != pinned_version():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=SDK_DIR, capture_output=True, text=True,
            timeout=INSTALL_TIMEOUT_SEC,
        )  # fmt: skip
        if done.returncode != 0:
            _unavailable(f"npm ci in {SDK_DIR} failed:\n{done.stderr[-2000:]}")
    return binary
