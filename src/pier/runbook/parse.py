"""Split a RUNBOOK.md into frontmatter and body, and validate the frontmatter."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pier.errors import InputError, Problems, RunbookError
from pier.runbook.model import Frontmatter

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
        raise _yaml_error(exc, raw, path, first_line) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RunbookError(
            "frontmatter must be a mapping of keys (agent: ..., model: ...)",
            path=path,
            line=first_line,
        )
    return data


def _yaml_error(exc: yaml.MarkedYAMLError, raw: str, path: str | None, first_line: int) -> RunbookError:
    """The YAML error at the place to fix: an unclosed `[` or `{` is reported where
    it was opened (the parser notices only on a later line)."""
    mark, problem = exc.problem_mark, str(exc.problem)
    context = exc.context_mark
    opened = exc.context and "flow" in exc.context and context is not None
    if context is not None and (opened or mark is None or mark.line >= len(raw.splitlines())):
        if mark is not None and mark.line > context.line:
            problem = (
                f"the {'list' if 'sequence' in str(exc.context) else 'mapping'} opened here is not closed "
                f"before line {first_line + mark.line} ({problem}): close it"
            )
        mark = context
    line = first_line + mark.line if mark else None
    column = mark.column + 1 if mark else None
    return RunbookError(f"frontmatter is not valid YAML: {problem}", path=path, line=line, column=column)


def _validate(data: dict[str, Any], raw: str, path: str | None, first_line: int) -> Frontmatter:
    """The frontmatter; Problems (or one RunbookError) naming every bad key and its line."""
    try:
        return Frontmatter.model_validate(data)
    except ValidationError as exc:
        problems: list[InputError] = []
        for error in exc.errors():
            loc = [str(part) for part in error["loc"]]
            dotted = ".".join(loc)
            line, column = key_position(raw, loc, first_line)
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(
                RunbookError(f"frontmatter key '{dotted}': {message}", path=path, line=line, column=column)
            )
        Problems.raise_any(problems)
        raise  # pragma: no cover - pydantic always lists at least one error


def key_position(raw: str, loc: list[str], first_line: int) -> tuple[int | None, int | None]:
    """(line, column), 1-based in the file, of the frontmatter node at `loc`
    (`["checks", "1", "type"]`), or of its nearest parent that exists."""
    try:
        node = yaml.compose(raw)
    except yaml.YAMLError:
        node = None
    best: tuple[int | None, int | None] = (None, None)
    for part in loc:
        child = _child(node, part)
        if child is None:
            break
        key_node, node = child
        best = (first_line + key_node.start_mark.line, key_node.start_mark.column + 1)
    return best


def _child(node: Any, part: str) -> tuple[Any, Any] | None:
    """(the node that names `part`, its value) in a mapping or a list node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if str(key.value) == part:
                return key, value
    if isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
        item = node.value[int(part)]
        return item, item
    return None


def _warnings(frontmatter: Frontmatter) -> list[str]:
    # An agent pier does not have is an error of the plan (get_agent), not a warning.
    return [f"unknown frontmatter key '{key}' (kept, not used)" for key in frontmatter.unknown_keys]
