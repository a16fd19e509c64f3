"""Path expressions of a workflow: how a step reads a value that
`init_params` or an earlier step holds (docs/workflows.md).

    init_params.prompt              a run parameter
    split.outputs.chunks            an earlier step's output
    split.outputs.items[0].name     a list index (negative counts from the end)
    split.outputs.items[*].id       every item's id, as a list
    chat.inputs.prompt              what an earlier step was given

The grammar is pier's (the platform's): dot-separated keys, each followed by
any number of `[n]` or `[*]`. A path that names nothing is an error that says
which part is missing, never a silent None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pier.errors import InputError

_PART = re.compile(r"^([^.\[\]]+)((?:\[(?:-?\d+|\*)\])*)$")
_INDEX = re.compile(r"\[(-?\d+|\*)\]")
ALL = "*"


class PathError(InputError):
    """A path that is malformed, or names a value that is not there."""


@dataclass(frozen=True)
class Path:
    text: str
    parts: tuple[str | int, ...]  # keys (str), indexes (int) and ALL

    @property
    def root(self) -> str:
        return str(self.parts[0])

    @property
    def section(self) -> str | None:
        """`outputs` or `inputs` for a step's path; None for init_params."""
        if self.root == "init_params" or len(self.parts) < 2:
            return None
        return str(self.parts[1])


def parse_path(text: Any) -> Path:
    """A path expression, checked; PathError saying what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise PathError(f"a path must be a non-empty string such as 'init_params.prompt', got {text!r}")
    parts: list[str | int] = []
    for piece in text.strip().split("."):
        match = _PART.match(piece)
        if match is None:
            raise PathError(
                f"path {text!r}: {piece!r} is not a key (optionally followed by [n] or [*]); "
                "write paths such as 'step.outputs.items[0].name'"
            )
        parts.append(match.group(1))
        for index in _INDEX.findall(match.group(2)):
            parts.append(ALL if index == ALL else int(index))
    path = Path(text.strip(), tuple(parts))
    if path.root != "init_params" and (len(parts) < 2 or parts[1] not in ("outputs", "inputs")):
        raise PathError(f"path {text!r} must start with init_params. or <step>.outputs. (or <step>.inputs.)")
    return path


def lookup_path(text: str, context: Mapping[str, Any]) -> Any:
    """The value `text` names in context ({"init_params": ..., <step>: {"inputs", "outputs"}});
    PathError naming the first part that is missing."""
    path = parse_path(text)
    return _walk(path, path.parts, context, 0)


def _walk(path: Path, parts: Sequence[str | int], value: Any, depth: int) -> Any:
    for i, part in enumerate(parts):
        where = _render(path.parts[: depth + i])
        if part == ALL:
            if not isinstance(value, list):
                raise PathError(
                    f"path {path.text!r}: {where} is not a list ({_kind(value)}), so [*] names nothing"
                )
            return [_walk(path, parts[i + 1 :], item, depth + i + 1) for item in value]
        if isinstance(part, int):
            if not isinstance(value, list):
                raise PathError(
                    f"path {path.text!r}: {where} is not a list ({_kind(value)}), so [{part}] names nothing"
                )
            if not -len(value) <= part < len(value):
                raise PathError(
                    f"path {path.text!r}: {where} has {len(value)} items, so [{part}] names nothing"
                )
            value = value[part]
            continue
        if not isinstance(value, Mapping):
            raise PathError(
                f"path {path.text!r}: {where} is not an object ({_kind(value)}), so it has no {part!r}"
            )
        if part not in value:
            if depth + i == 0:
                raise PathError(
                    f"path {path.text!r}: there is no step {part!r} before this one (and it is not init_params)"
                )
            keys = ", ".join(sorted(map(str, value))[:20]) or "none"
            raise PathError(f"path {path.text!r}: {where} has no {part!r} (it has: {keys})")
        value = value[part]
    return value


def _render(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int) or part == ALL:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "the workflow"


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
