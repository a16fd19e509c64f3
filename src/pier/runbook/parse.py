"""Split a RUNBOOK.md into frontmatter and body, and validate the frontmatter."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pier.errors import RunbookError
from pier.runbook.model import KNOWN_AGENTS, Frontmatter

RUNBOOK_FILENAME = "RUNBOOK.md"
_FENCE = re.compile(r"^---[ \t]*$")


@dataclass(frozen=True)
class Runbook:
    frontmatter: Frontmatter
    body: str
    text: str
    path: str | None = None
    warnings: tuple[str, ...] = field(default=())


def locate(path: Path) -> Path:
    """A RUNBOOK.md, or a folder holding one."""
    if path.is_dir():
        candidate = path / RUNBOOK_FILENAME
        if not candidate.is_file():
            raise RunbookError(f"no {RUNBOOK_FILENAME} in this folder", path=str(path))
        return candidate
    if not path.is_file():
        raise RunbookError("no such file or folder", path=str(path))
    return path


def load(path: Path) -> Runbook:
    file = locate(path)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunbookError(f"not UTF-8 text ({exc.reason})", path=str(file)) from exc
    return parse(text, path=str(file))


def split(text: str, path: str | None = None) -> tuple[str | None, str, int]:
    """(frontmatter text or None, body, line number where the frontmatter starts)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or not _FENCE.match(lines[0].rstrip("\r\n")):
        return None, text, 0
    for index in range(1, len(lines)):
        if _FENCE.match(lines[index].rstrip("\r\n")):
            return "".join(lines[1:index]), "".join(lines[index + 1 :]), 2
    raise RunbookError("frontmatter opened with '---' on line 1 is never closed", path=path, line=1)


def parse(text: str, path: str | None = None) -> Runbook:
    raw, body, first_line = split(text, path)
    data = _load_yaml(raw, path, first_line) if raw is not None else {}
    frontmatter = _validate(data, raw or "", path, first_line)
    return Runbook(
        frontmatter=frontmatter,
        body=body,
        text=text,
        path=path,
        warnings=tuple(_warnings(frontmatter)),
    )


def _load_yaml(raw: str, path: str | None, first_line: int) -> dict[str, Any]:
    try:
        data = yaml.safe_load(raw)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.context_mark and (mark is None or mark.line >= len(raw.splitlines())):
            mark = exc.context_mark  # "unexpected end": the opening bracket is the useful line
        line = first_line + mark.line if mark else None
        raise RunbookError(f"frontmatter is not valid YAML: {exc.problem}", path=path, line=line) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RunbookError(
            "frontmatter must be a mapping of keys (agent: ..., model: ...)",
            path=path,
            line=first_line,
        )
    return data


def _validate(data: dict[str, Any], raw: str, path: str | None, first_line: int) -> Frontmatter:
    try:
        return Frontmatter.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        dotted = ".".join(str(part) for part in error["loc"])
        line = _line_of_key(raw, key, first_line)
        raise RunbookError(f"frontmatter key '{dotted}': {error['msg']}", path=path, line=line) from exc


def _line_of_key(raw: str, key: str, first_line: int) -> int | None:
    pattern = re.compile(rf"^{re.escape(key)}\s*:")
    for offset, line in enumerate(raw.splitlines()):
        if pattern.match(line):
            return first_line + offset
    return None


def _warnings(frontmatter: Frontmatter) -> list[str]:
    warnings = [f"unknown frontmatter key '{key}' (kept, not used)" for key in frontmatter.unknown_keys]
    if frontmatter.agent and frontmatter.agent not in KNOWN_AGENTS:
        warnings.append(f"agent '{frontmatter.agent}' is not one pier knows: {', '.join(KNOWN_AGENTS)}")
    return warnings
