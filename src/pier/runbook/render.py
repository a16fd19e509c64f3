"""Fill {{ variables }}. Anything unknown is left as written and reported:
real runbooks contain code with braces."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RESULTS_DIR = "/app/results"
ASSETS_DIR = "/app/assets"
CHECKS_DIR = "/app/checks"
BUILTIN_VARS = {"results_dir": RESULTS_DIR, "assets_dir": ASSETS_DIR, "checks_dir": CHECKS_DIR}

_PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}", re.S)


@dataclass(frozen=True)
class Rendered:
    text: str
    unfilled: tuple[str, ...]  # names left as written, in order of first use


def variables(vars_: Mapping[str, Any], secrets: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every name a runbook may use, built-ins last so a run cannot move them."""
    names = {key: _as_text(value) for key, value in vars_.items()}
    names.update({f"secrets.{key}": value for key, value in (secrets or {}).items()})
    names.update(BUILTIN_VARS)
    return names


def render(text: str, names: Mapping[str, str]) -> Rendered:
    unfilled: dict[str, None] = {}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in names:
            return names[name]
        unfilled.setdefault(name, None)
        return match.group(0)

    return Rendered(text=_PLACEHOLDER.sub(fill, text), unfilled=tuple(unfilled))


def placeholders(text: str) -> list[str]:
    return list(dict.fromkeys(match.group(1) for match in _PLACEHOLDER.finditer(text)))


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
