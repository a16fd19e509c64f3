"""The check schema: one model per `type`, validated at prepare so a bad
check fails the run before any sandbox exists, with an error naming the check
and the field."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from pier.errors import InputError

DEFAULT_TIMEOUT_SEC = 300
MAX_TIMEOUT_SEC = 3600
# A check's name becomes a folder, /app/checks/<name>: keep it a plain file name.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ISOLATIONS = ("same", "fresh")


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(pattern=NAME_PATTERN)
    timeout_sec: int = Field(DEFAULT_TIMEOUT_SEC, gt=0, le=MAX_TIMEOUT_SEC)

    @property
    def builtin(self) -> bool:
        return self.type != "code"  # type: ignore[attr-defined]


class _PathCheck(_Check):
    path: str

    @field_validator("path")
    @classmethod
    def _inside_results(cls, value: str) -> str:
        return results_path(value)


class FileExists(_PathCheck):
    type: Literal["file_exists"]


class Nonempty(_PathCheck):
    """A file with at least one byte, or a folder holding at least one file."""

    type: Literal["nonempty"]


class JsonValid(_PathCheck):
    type: Literal["json_valid"]


class JsonField(_PathCheck):
    """`field` is a dotted path (`results.items.0.name`); every condition given must hold.
    With no condition the field only has to exist."""

    type: Literal["json_field"]
    field: str = Field(min_length=1)
    equals: Any = None
    in_: list[Any] | None = Field(None, alias="in")
    min: float | None = None
    max: float | None = None


class Regex(_PathCheck):
    """`pattern` (Python syntax, ^ and $ match at each line) must be found in the
    file, or with `must_match: false` must not be."""

    type: Literal["regex"]
    pattern: str = Field(min_length=1)
    must_match: bool = True
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


class CodeCheck(_Check):
    """`source` (a git URL, or a local folder or repository for `pier run`) is placed
    in /app/checks/<name> after the agent stopped; `run` then runs in /app."""

    type: Literal["code"]
    source: str = Field(min_length=1)
    ref: str | None = Field(None, min_length=1)
    run: str = Field(min_length=1)

    @field_validator("source", "ref")
    @classmethod
    def _not_an_option(cls, value: str | None) -> str | None:
        # Both reach git's command line: a leading dash would read as an option.
        if value is not None and value.strip().startswith("-"):
            raise ValueError("must not start with '-'")
        return value.strip() if value is not None else None


Check = Annotated[
    FileExists | Nonempty | JsonValid | JsonField | Regex | CodeCheck, Field(discriminator="type")
]
CHECK_TYPES = ("file_exists", "nonempty", "json_valid", "json_field", "regex", "code")


_CHECK = TypeAdapter(Check)


def results_path(value: str) -> str:
    """A path relative to the results folder, from one that may start with
    /app/results/ or ./. Raises ValueError when it would leave that folder."""
    text = value.strip()
    absolute = text.startswith("/") and not text.startswith("/app/results/")
    path = re.sub(r"^(\./|/app/results/)", "", text).strip("/")
    if absolute or not path:
        raise ValueError(f"'{value}' must be a path inside the results folder, such as report.md")
    if ".." in PurePosixPath(path).parts:
        raise ValueError(f"'{value}' leaves the results folder (..)")
    return path


def parse_checks(raw: Any) -> tuple[Check, ...]:
    """The checks of a runbook or run, validated. Raises InputError naming the
    check (by position and name) and the field."""
    if not isinstance(raw, list | tuple):
        raise InputError(f"checks must be a list of checks, got {type(raw).__name__}")
    checks: list[Check] = []
    for index, item in enumerate(raw):
        checks.append(_parse_one(index, item))
    seen: set[str] = set()
    for index, check in enumerate(checks):
        if check.name in seen:
            raise InputError(
                f"checks[{index}] '{check.name}': two checks have this name; names must be unique"
            )
        seen.add(check.name)
    return tuple(checks)


def _parse_one(index: int, item: Any) -> Check:
    if not isinstance(item, dict):
        raise InputError(f"checks[{index}] must be a mapping with name and type, got {type(item).__name__}")
    label = f"checks[{index}]" + (f" '{item['name']}'" if isinstance(item.get("name"), str) else "")
    try:
        return _CHECK.validate_python(item)
    except ValidationError as exc:
        raise InputError(f"{label}: {_first_problem(exc, item)}") from None


def _first_problem(exc: ValidationError, item: dict[str, Any]) -> str:
    error = exc.errors()[0]
    kind = error["type"]
    if kind == "union_tag_not_found":
        return f"`type` is missing; use one of {', '.join(CHECK_TYPES)}"
    if kind == "union_tag_invalid":
        return f"type '{item.get('type')}' is not known; use one of {', '.join(CHECK_TYPES)}"
    # loc is (<type tag>, field, ...): the field is what the user wrote.
    field = ".".join(str(part) for part in error["loc"][1:]) or "check"
    if kind == "missing":
        return f"`{field}` is required"
    if field == "name" and kind == "string_pattern_mismatch":
        return "`name` must be 1-64 letters, digits, '.', '_' or '-' (it names /app/checks/<name>)"
    if kind == "extra_forbidden":
        return f"`{field}` is not a field of a {error['loc'][0]} check"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"`{field}`: {message}"


def check_isolation(value: str | None) -> str:
    isolation = (value or "same").strip()
    if isolation not in ISOLATIONS:
        raise InputError(f"checks_isolation '{value}' is not known; use one of {', '.join(ISOLATIONS)}")
    return isolation


def program_spec(check: Check) -> dict[str, Any]:
    """What the in-sandbox program needs of a built-in check: its type, path and
    the conditions the runbook set (an unset `equals` differs from `equals: null`)."""
    return check.model_dump(by_alias=True, exclude_unset=True, exclude={"name", "timeout_sec"})
