"""The plan's part of a run's evaluation: its checks from both front ends (the
frontmatter's `checks:` and the body's `## Code Checks`), with `{{results_dir}}`,
`{{checks_dir}}`, `{{assets_dir}}` and the run's variables filled in every field
that runs in the sandbox; who gets which secret (the platform's secret
exposure); and the note appended to the agent's instruction naming the checks it
runs and the ones pier runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pier.checks import Check, load_checks
from pier.checks.platform import CodeChecksConfig, compile_code_checks
from pier.errors import InputError, Problems
from pier.runbook.render import render
from pier.runbook.sections import code_checks


@dataclass(frozen=True)
class PlannedChecks:
    checks: tuple[Check, ...]
    config: CodeChecksConfig
    lines: Mapping[str, tuple[int, int]]  # a `## Code Checks` check -> (line, column) in the body
    warnings: tuple[str, ...]


def plan_checks(
    raw_checks: tuple[dict[str, Any], ...],
    config: CodeChecksConfig,
    body: str,
    names: Mapping[str, str],
    source_dir: Path | None,
) -> PlannedChecks:
    """Both forms of checks as one list. Raises InputError (Problems) for a bad
    `checks:` entry or `code_checks:` key; a bad `## Code Checks` heading is an
    InvalidCheck (an `error` entry at run time, an error in `pier validate`)."""
    problems: list[InputError] = []
    warnings: list[str] = []
    filled = [_filled(item, names, f"checks[{index}]", warnings) for index, item in enumerate(raw_checks)]
    try:
        own = load_checks(filled, source_dir)
    except InputError as exc:
        own = ()
        problems.append(exc.at("checks"))
    rendered = render(body, names)
    compiled = compile_code_checks(code_checks(rendered.text), config)
    for check in compiled.checks:
        for name in render(getattr(check, "run", "") or "", names).unfilled:
            warnings.append(
                f"check {check.name}: {{{{{name}}}}} is not filled (no such variable): left as written"
            )
    taken = {check.name for check in own}
    for check in compiled.checks:
        if check.name in taken:
            problems.append(
                InputError(
                    f"check {check.name}: a `checks:` entry and a `## Code Checks` heading have this id; "
                    "rename one"
                ).at("checks")
            )
    Problems.raise_any(problems)
    return PlannedChecks((*own, *compiled.checks), config, compiled.lines, tuple(warnings))


def _filled(item: Any, names: Mapping[str, str], label: str, warnings: list[str]) -> Any:
    """A `checks:` entry with its variables filled in every string field."""
    if not isinstance(item, dict):
        return item
    out: dict[str, Any] = {}
    for key, value in item.items():
        if isinstance(value, str) and key not in ("name", "type"):
            done = render(value, names)
            for name in done.unfilled:
                warnings.append(
                    f"{label}.{key}: {{{{{name}}}}} is not filled (no such variable): left as written"
                )
            value = done.text
        out[key] = value
    return out


@dataclass(frozen=True)
class Exposure:
    """Which secrets (by variable) the agent's environment gets, and which the checks pier runs get."""

    withheld: frozenset[str]  # from the agent
    to_checks: frozenset[str]
    consumed: Mapping[str, str]  # variable -> who consumes it (a source's or an MCP server's name)


def exposure(
    decls: Mapping[str, Any],
    config: CodeChecksConfig,
    mcp_servers: Mapping[str, Any],
    variable_of: Any,
) -> Exposure:
    """The platform's rule: a secret reaches the agent unless a check source or MCP
    server names it with `secret:` (then pier consumes it); `expose_to_agent`
    overrides either default. The checks get what the agent got, plus a withheld
    secret with `expose_to_checks: true`. Raises InputError for a `secret:` that
    names no declared secret."""
    consumers: dict[str, str] = {}
    problems: list[InputError] = []
    named = [
        (f"code_checks.sources.{i}.secret", f"source {s.name}", s.secret)
        for i, s in enumerate(config.sources)
    ]
    for server, spec in mcp_servers.items():
        if isinstance(spec, Mapping) and spec.get("secret"):
            named.append((f"mcp_servers.{server}.secret", f"MCP server {server}", str(spec["secret"])))
    for where, who, secret in named:
        if secret is None:
            continue
        if secret not in decls:
            declared = ", ".join(decls) or "none"
            problems.append(
                InputError(
                    f"{where}: '{secret}' is not declared under secrets: (declared: {declared}); declare it "
                    f"({secret}: {{env: {secret}}}) or fix the name"
                ).at(where)
            )
            continue
        consumers.setdefault(secret, who)
    Problems.raise_any(problems)
    withheld: set[str] = set()
    to_checks: set[str] = set()
    consumed: dict[str, str] = {}
    for name, decl in decls.items():
        decl = decl or {}
        variable = variable_of(name, decl)
        agent = decl.get("expose_to_agent")
        gets = (name not in consumers) if agent is None else bool(agent)
        if not gets:
            withheld.add(variable)
        if gets or decl.get("expose_to_checks") is True:
            to_checks.add(variable)
        if name in consumers:
            consumed[variable] = consumers[name]
    return Exposure(frozenset(withheld), frozenset(to_checks), consumed)


def agent_note(checks: tuple[Check, ...], references: tuple[str, ...] = ()) -> str:
    """The note appended to the instruction when the runbook has `## Code Checks`:
    the ids the agent runs and reports, the ids pier runs after it, and the
    `code_checks.references` it may read while checking."""
    platform = [check for check in checks if check.origin == "code_checks"]
    if not platform:
        return ""
    agents = [check.name for check in checks if not check.runs_here]
    pier = [check.name for check in checks if check.runs_here]
    lines = ["", "---", "", "**Code Checks on this run (a note from the platform):**", ""]
    if agents:
        lines.append(
            "- You run these checks and report each in validation_report.json as a `kind: code_check` entry "
            f"with its id: {', '.join(agents)}."
        )
    else:
        lines.append("- You run none of the Code Checks.")
    if pier:
        lines.append(
            "- The platform runs these after you finish, in this sandbox; do not run them and write no "
            f"report entries for them: {', '.join(pier)}."
        )
    if references and agents:
        lines.append(f"- While checking you may read: {', '.join(references)}.")
    return "\n".join(lines) + "\n"


def consumed_by_servers(
    servers: Mapping[str, Any], decls: Mapping[str, Any], env: Mapping[str, str], variable_of: Any
) -> dict[str, Any]:
    """The MCP servers with the secret each names (`secret: NAME`) handed to the
    server itself, not the agent: a command server gets it in its own `env` (under
    the secret's variable), a URL server as `Authorization: Bearer` unless it sets
    that header. `secret` is pier's to read; the CLI's configuration never has it."""
    out: dict[str, Any] = {}
    for name, spec in servers.items():
        if not isinstance(spec, Mapping) or not spec.get("secret"):
            out[name] = spec
            continue
        spec = {key: value for key, value in spec.items() if key != "secret"}
        secret = str(servers[name]["secret"])
        variable = variable_of(secret, decls.get(secret))
        value = env.get(variable)
        if value is not None and spec.get("url"):
            headers = dict(spec.get("headers") or {})
            headers.setdefault("Authorization", f"Bearer {value}")
            spec["headers"] = headers
        elif value is not None:
            spec["env"] = {**dict(spec.get("env") or {}), variable: value}
        out[name] = spec
    return out
