"""The check schema: one model per `type`, validated at prepare so a bad
check fails the run before any sandbox exists, with an error naming the check
and the field."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from pier.errors import InputError

DEFAULT_TIMEOUT_SEC = 300
MAX_TIMEOUT_SEC = 3600
MAX_PLATFORM_TIMEOUT_SEC = 900  # code_checks.timeout_sec (the platform's limit)
# A check's name becomes a folder, /app/checks/<name>: keep it a plain file name.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ISOLATIONS = ("same", "fresh")


RUNNERS = ("jetty", "agent")  # the platform's names: `jetty` is pier itself, `agent` the run's agent
# Fields pier sets when it compiles a `## Code Checks` heading; a `checks:` entry may not.
COMPILED_FIELDS = ("title", "runner", "origin")


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(pattern=NAME_PATTERN)
    timeout_sec: int = Field(DEFAULT_TIMEOUT_SEC, gt=0, le=MAX_TIMEOUT_SEC)
    title: str | None = None  # a `## Code Checks` heading's name
    runner: Literal["jetty", "agent"] = "jetty"  # who runs it and reports it
    origin: Literal["checks", "code_checks"] = "checks"  # frontmatter `checks:` or the body

    @property
    def builtin(self) -> bool:
        return self.type not in ("code", "command", "agent", "invalid")  # type: ignore[attr-defined]

    @property
    def runs_here(self) -> bool:
        """Whether pier runs it after the agent (else the agent runs and reports it)."""
        return self.runner == "jetty"


class _PathCheck(_Check):
    path: str

    @field_validator("path")
    @classmethod
    def _inside_results(cls, value: str) -> str:
        return results_path(value)


class _TargetCheck(_Check):
    """A built-in of the platform's: one `path`, or a `glob` of paths, relative to
    the results folder (every file the glob matches must pass; none matching fails)."""

    path: str | None = None
    glob: str | None = None

    @field_validator("path", "glob")
    @classmethod
    def _inside_results(cls, value: str | None) -> str | None:
        return None if value is None else results_path(value)

    @model_validator(mode="after")
    def _one_target(self) -> _TargetCheck:
        if (self.path is None) == (self.glob is None) and not self.default_glob:
            raise ValueError(
                "`path` is required (or a `glob` instead, not both), relative to the results folder"
            )
        return self

    default_glob: ClassVar[str | None] = None


class FileExists(_TargetCheck):
    type: Literal["file_exists"]


class MinSize(_TargetCheck):
    """Every file holds at least `min_bytes` bytes (1: not empty)."""

    type: Literal["min_size"]
    min_bytes: int = Field(1, ge=0)


class RegexPresent(_TargetCheck):
    type: Literal["regex_present", "regex_absent"]
    pattern: str = Field(min_length=1)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return _compiled(value)


class MarkdownLinks(_TargetCheck):
    """Every relative link of the Markdown files names a file that exists."""

    type: Literal["markdown_relative_links_resolve"]
    default_glob: ClassVar[str | None] = "**/*.md"


class Nonempty(_PathCheck):
    """A file with at least one byte, or a folder holding at least one file."""

    type: Literal["nonempty"]


class JsonValid(_TargetCheck):
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
        return _compiled(value)


def _compiled(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class CommandCheck(_Check):
    """A `## Code Checks` bash fence: `run` under `bash -e -o pipefail` in /app,
    with RESULTS_DIR, CHECKS_DIR and ASSETS_DIR set."""

    type: Literal["command"]
    run: str = Field(min_length=1)


class AgentCheck(_Check):
    """A `## Code Checks` agent fence: only the agent can carry it out and report it."""

    type: Literal["agent"]
    instruction: str = ""
    runner: Literal["jetty", "agent"] = "agent"


class InvalidCheck(_Check):
    """A `## Code Checks` heading pier could not make a check of: recorded as
    `error` with `problem`, never run (`pier validate` reports it at its line)."""

    type: Literal["invalid"]
    name: str = Field(min_length=1)
    problem: str


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
    FileExists
    | Nonempty
    | JsonValid
    | JsonField
    | Regex
    | CodeCheck
    | MinSize
    | RegexPresent
    | MarkdownLinks
    | CommandCheck
    | AgentCheck
    | InvalidCheck,
    Field(discriminator="type"),
]
CHECK_TYPES = ("file_exists", "nonempty", "json_valid", "json_field", "regex", "code")
# The built-ins a `## Code Checks` yaml fence may `use:` (the platform's list).
PLATFORM_BUILTINS = (
    "file_exists", "min_size", "json_valid", "regex_present", "regex_absent",
    "markdown_relative_links_resolve",
)  # fmt: skip


_CHECK = TypeAdapter(Check)


def validate_check(item: dict[str, Any]) -> Check:
    """One check from its fields; raises pydantic's ValidationError."""
    return _CHECK.validate_python(item)


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
    own = [key for key in (*COMPILED_FIELDS, "problem") if key in item]
    if own or item.get("type") in ("command", "agent", "invalid"):
        what = f"`{own[0]}`" if own else f"type '{item.get('type')}'"
        raise InputError(
            f"{label}: {what} belongs to the checks of a `## Code Checks` section, not to `checks:`; "
            "write such a check as a `### <id> — <name>` heading there"
        )
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
    return message if field == "check" else f"`{field}`: {message}"


def check_isolation(value: str | None) -> str:
    isolation = (value or "same").strip()
    if isolation not in ISOLATIONS:
        raise InputError(f"checks_isolation '{value}' is not known; use one of {', '.join(ISOLATIONS)}")
    return isolation


def program_spec(check: Check) -> dict[str, Any]:
    """What the in-sandbox program needs of a built-in check: its type, path and
    the conditions the runbook set (an unset `equals` differs from `equals: null`)."""
    spec = check.model_dump(
        by_alias=True, exclude_unset=True, exclude={"name", "timeout_sec", *COMPILED_FIELDS}
    )
    glob = getattr(check, "default_glob", None)
    if glob and spec.get("path") is None and spec.get("glob") is None:
        spec["glob"] = glob
    return spec
