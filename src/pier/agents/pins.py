"""Every agent CLI version pier installs, in one place. Node's pin lives
with the snapshot recipes (sandbox/recipes/_node22.Dockerfile), which the run-time
Node install reads, so images and run-time installs agree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Pin:
    package: str  # the registry's name for it
    version: str
    registry: Literal["npm", "pypi"]
    node_major: int = 0  # the Node major the CLI needs (npm packages only)

    @property
    def spec(self) -> str:
        return (
            f"{self.package}@{self.version}" if self.registry == "npm" else f"{self.package}=={self.version}"
        )


PINS: dict[str, Pin] = {
    "claude-code": Pin("@anthropic-ai/claude-code", "2.1.332", "npm", node_major=22),
    "codex": Pin("@openai/codex", "0.171.0", "npm", node_major=16),
    "opencode": Pin("opencode-ai", "1.18.33", "npm", node_major=18),
    "gemini-cli": Pin("@google/gemini-cli", "0.61.0", "npm", node_major=20),
    "hermes": Pin("hermes-agent", "0.19.0", "pypi"),
}
