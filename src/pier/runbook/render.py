"""Fill {{ variables }}.

A placeholder is a *variable* when what is between the braces is a plain name
(`{{person}}`, `{{ results_dir }}`, `{{secrets.TOKEN}}`) and it is not written
`${{...}}`. Anything else that looks like one (`{{ a | b }}`, `{{#each}}`,
`${{ github.sha }}`, `{{ x.y }}`) is another tool's template text: left as
written, never reported. Whether an unfilled variable is an error is the plan's
rule (`pier.lifecycle.plan`), not this module's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RESULTS_DIR = "/app/results"
ASSETS_DIR = "/app/assets"
CHECKS_DIR = "/app/checks"
BUILTIN_VARS = {"results_dir": RESULTS_DIR, "assets_dir": ASSETS_DIR, "checks_dir": CHECKS_DIR}

_PLACEHOLDER = re.compile(r"(\$?)\{\{\s*(.*?)\s*\}\}", re.S)
_NAME = re.compile(r"(secrets\.)?[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Rendered:
    text: str
    unfilled: tuple[str, ...]  # variables left as written, in order of first use


def is_variable(name: str, dollar: str = "") -> bool:
    """Whether `{{name}}` is a pier variable rather than another tool's template text."""
    return not dollar and _NAME.fullmatch(name) is not None


def variables(vars_: Mapping[str, Any], secrets: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every name a runbook may use, built-ins last so a run cannot move them."""
    names = {key: _as_text(value) for key, value in vars_.items()}
    names.update({f"secrets.{key}": value for key, value in (secrets or {}).items()})
    names.update(BUILTIN_VARS)
    return names


def render(text: str, names: Mapping[str, str]) -> Rendered:
    unfilled: dict[str, None] = {}

    def fill(match: re.Match[str]) -> str:
        dollar, name = match.group(1), match.group(2)
        if not is_variable(name, dollar):
            return match.group(0)
        if name in names:
            return names[name]
        unfilled.setdefault(name, None)
        return match.group(0)

    return Rendered(text=_PLACEHOLDER.sub(fill, text), unfilled=tuple(unfilled))


def placeholders(text: str) -> list[str]:
    """The variables `text` uses (not secrets.*, not built-ins), in order of first use."""
    found = (m.group(2) for m in _PLACEHOLDER.finditer(text) if is_variable(m.group(2), m.group(1)))
    return [name for name in dict.fromkeys(found) if "." not in name and name not in BUILTIN_VARS]


def line_of(text: str, name: str) -> int | None:
    """The 1-based line of the first `{{name}}` in text (None when absent)."""
    for match in _PLACEHOLDER.finditer(text):
        if match.group(2) == name and not match.group(1):
            return text.count("\n", 0, match.start()) + 1
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
