"""The platform's checks: a runbook body's `## Code Checks` section compiled into
pier's one check model (pier.checks.model), and the frontmatter's `code_checks:`
settings. A heading pier cannot make a check of becomes an InvalidCheck (an
`error` entry), and `pier validate` reports its problem at its line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pier.checks.model import (
    MAX_PLATFORM_TIMEOUT_SEC,
    NAME_PATTERN,
    PLATFORM_BUILTINS,
    Check,
    _first_problem,
    validate_check,
)
from pier.errors import InputError, Problems
from pier.runbook.sections import CHECK_ID, CheckHeading, Fence

PLATFORM_TIMEOUT_SEC = 120
COMMAND_LANGS = frozenset({"bash", "sh", "shell", ""})
BUILTIN_LANGS = frozenset({"yaml", "yml", "check"})
AGENT_LANGS = frozenset({"agent"})


class Source(BaseModel):
    """A `code_checks.sources[]` entry: a git repository cloned to /app/checks/<name>."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    type: Literal["git"] = "git"
    url: str
    ref: str | None = Field(None, min_length=1)
    secret: str | None = Field(None, min_length=1)

    @field_validator("url")
    @classmethod
    def _https(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith("https://"):
            raise ValueError(f"'{value}' must be an https:// URL")
        return value

    @field_validator("ref")
    @classmethod
    def _not_an_option(cls, value: str | None) -> str | None:
        if value is not None and value.strip().startswith("-"):
            raise ValueError("must not start with '-'")
        return value


class CodeChecksConfig(BaseModel):
    """The frontmatter's `code_checks:` (a task default a run may override)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    executor: Literal["jetty", "agent"] = "jetty"
    timeout_sec: int = Field(PLATFORM_TIMEOUT_SEC, gt=0, le=MAX_PLATFORM_TIMEOUT_SEC)
    sources: tuple[Source, ...] = ()
    mcp_servers: dict[str, Any] = Field(default_factory=dict)
    references: tuple[str, ...] = ()


def code_checks_config(raw: Any) -> CodeChecksConfig:
    """`code_checks:` validated. Raises InputError naming the field."""
    if raw is None:
        return CodeChecksConfig()
    if not isinstance(raw, Mapping):
        raise InputError(f"code_checks must be a mapping, got {type(raw).__name__}").at("code_checks")
    try:
        config = CodeChecksConfig.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "not a key of code_checks (executor, timeout_sec, sources, mcp_servers, references)"
            problems.append(InputError(f"code_checks.{where}: {message}").at(f"code_checks.{where}"))
        Problems.raise_any(problems)
        raise
    names = [source.name for source in config.sources]
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"code_checks.sources: two sources are named '{name}'").at("code_checks.sources")
    return config


def lenient_config(raw: Any) -> CodeChecksConfig:
    """`code_checks:` with its bad keys left out (their defaults instead), so the
    rest is still checked in the same round."""
    try:
        return code_checks_config(raw)
    except InputError as exc:
        bad = {p.key.split(".")[1] for p in getattr(exc, "problems", (exc,)) if p.key and "." in p.key}
    good = (
        {key: value for key, value in dict(raw).items() if key not in bad} if isinstance(raw, Mapping) else {}
    )
    try:
        return code_checks_config(good)
    except InputError:
        return CodeChecksConfig()


@dataclass(frozen=True)
class Compiled:
    """The checks a body's `## Code Checks` section makes, and where each heading is."""

    checks: tuple[Check, ...]
    lines: Mapping[str, tuple[int, int]]  # check name -> (line, column) in the body


def compile_code_checks(headings: Sequence[CheckHeading], config: CodeChecksConfig) -> Compiled:
    checks: list[Check] = []
    lines: dict[str, tuple[int, int]] = {}
    seen: set[str] = set()
    for number, heading in enumerate(headings, 1):
        check = _compile_one(heading, config)
        if check.name in seen:
            check = _invalid(
                f"{check.name}#{number}",
                heading,
                f"two checks have the id '{check.name}'; ids must be unique",
            )
        seen.add(check.name)
        checks.append(check)
        lines[check.name] = (heading.line, heading.column)
    return Compiled(tuple(checks), lines)


def _compile_one(heading: CheckHeading, config: CodeChecksConfig) -> Check:
    if heading.id is None or not CHECK_ID.match(heading.id):
        label = heading.id or heading.text or "(empty)"
        return _invalid(
            _safe_id(label),
            heading,
            f"heading '### {heading.text}' must read `### <id> — <name>`, the id of letters, digits, "
            "'.', '_' or '-'",
        )
    if not heading.fences:
        return _invalid(
            heading.id, heading, "has no fenced block: give it one (```bash, ```yaml or ```agent)"
        )
    if len(heading.fences) > 1:
        return _invalid(
            heading.id, heading, f"has {len(heading.fences)} fenced blocks; a check has exactly one"
        )
    fence = heading.fences[0]
    if not fence.closed:
        return _invalid(heading.id, heading, "its fenced block is never closed")
    common = {
        "name": heading.id,
        "title": heading.name,
        "origin": "code_checks",
        "timeout_sec": config.timeout_sec,
    }
    executor = fence.attrs.get("executor")
    if fence.lang in AGENT_LANGS:
        if executor not in (None, "agent"):
            return _invalid(
                heading.id,
                heading,
                f"an agent check runs only on the agent; executor={executor} is not allowed",
            )
        return validate_check({**common, "type": "agent", "instruction": fence.body.strip()})
    if executor not in (None, "agent", "jetty"):
        return _invalid(
            heading.id, heading, f"executor={executor} is not known; use executor=agent or leave it out"
        )
    runner = executor or ("agent" if config.executor == "agent" else "jetty")
    common["runner"] = runner
    if fence.lang in COMMAND_LANGS:
        if not fence.body.strip():
            return _invalid(heading.id, heading, "its bash block is empty")
        return validate_check({**common, "type": "command", "run": fence.body})
    if fence.lang in BUILTIN_LANGS:
        return _builtin(heading, fence, common)
    return _invalid(
        heading.id,
        heading,
        f"a ```{fence.lang} block is not a check: use ```bash, ```yaml (a built-in) or ```agent",
    )


def _builtin(heading: CheckHeading, fence: Fence, common: dict[str, Any]) -> Check:
    try:
        spec = yaml.safe_load(fence.body)
    except yaml.YAMLError as exc:
        return _invalid(heading.id or "", heading, f"its yaml block is not valid YAML: {exc}")
    if not isinstance(spec, dict) or "use" not in spec:
        return _invalid(
            heading.id or "", heading, f"its yaml block needs `use:`, one of {', '.join(PLATFORM_BUILTINS)}"
        )
    use = spec.pop("use")
    if use not in PLATFORM_BUILTINS:
        return _invalid(
            heading.id or "",
            heading,
            f"use: '{use}' is not a built-in; use one of {', '.join(PLATFORM_BUILTINS)}",
        )
    if "timeout_sec" in spec:
        asked = spec.pop("timeout_sec")
        if not isinstance(asked, int) or isinstance(asked, bool) or not 0 < asked <= MAX_PLATFORM_TIMEOUT_SEC:
            return _invalid(
                heading.id or "",
                heading,
                f"timeout_sec {asked!r} must be 1 to {MAX_PLATFORM_TIMEOUT_SEC} seconds",
            )
        common = {**common, "timeout_sec": asked}
    try:
        return validate_check({**spec, **common, "type": use})
    except ValidationError as exc:
        return _invalid(heading.id or "", heading, f"use: {use}: {_first_problem(exc, {'type': use})}")


def _invalid(name: str, heading: CheckHeading, problem: str) -> Check:
    return validate_check(
        {"type": "invalid", "name": name, "title": heading.name, "origin": "code_checks", "problem": problem}
    )


def _safe_id(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in text)[:64] or "check"
