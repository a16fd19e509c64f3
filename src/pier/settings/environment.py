"""What the operator set, read back in their words: a setting that does not
validate is one line naming its PIER_ variable, the value given and what is
allowed (never pydantic's traceback, which names the field); a PIER_* variable
pier does not know is a warning naming the closest one it does (a misspelling
would otherwise be ignored silently)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

PREFIX = "PIER_"
# PIER_* variables pier reads that are no setting: the resident process's
# (pier.launch, pier.resident) and the test suite's own.
OTHER_VARIABLES = frozenset({"PIER_RESIDENT", "PIER_RESIDENT_DIR", "PIER_SHARED_DIR"})
OTHER_PREFIXES = ("PIER_TEST_",)
MAX_VALUE = 80  # a value longer than this is cut in the message


def variable(field: str) -> str:
    return f"{PREFIX}{field.upper()}"


def known_variables(model: type[BaseModel]) -> set[str]:
    return {variable(name) for name in model.model_fields} | OTHER_VARIABLES


def _secret(model: type[BaseModel], field: str) -> bool:
    info = model.model_fields.get(field)
    return info is not None and "SecretStr" in repr(info.annotation)


def _shown(model: type[BaseModel], field: str, value: Any) -> str:
    if _secret(model, field):
        return "'***'"
    text = value if isinstance(value, str) else repr(value)
    if len(text) > MAX_VALUE:
        text = text[:MAX_VALUE] + "..."
    return repr(text) if isinstance(value, str) else text


def _given(field: str, fallback: Any, environ: Mapping[str, str], dotenv: Mapping[str, str | None]) -> Any:
    """What the operator wrote for `field`: the variable's text (the
    environment wins over .env, as in Settings), else what pydantic saw."""
    name = variable(field)
    for source in (environ, dotenv):
        for key, value in source.items():
            if key.upper() == name and value is not None:
                return value
    return fallback


def _allowed(model: type[BaseModel], field: str, message: str) -> str:
    message = message.removeprefix("Value error, ")
    info = model.model_fields.get(field)
    what = f" ({info.description})" if info is not None and info.description else ""
    return f"{message}{what}"


def describe_validation(
    model: type[BaseModel],
    exc: ValidationError,
    environ: Mapping[str, str] | None = None,
    dotenv: Mapping[str, str | None] | None = None,
) -> list[str]:
    """One line per bad setting: `PIER_X='value' is not allowed: <what is>`."""
    environ = os.environ if environ is None else environ
    dotenv = {} if dotenv is None else dotenv
    lines: dict[str, str] = {}
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error.get("loc", ())]
        if not loc:
            continue
        field = loc[0]
        where = "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in loc[1:])
        value = _given(field, error.get("input"), environ, dotenv)
        line = f"{variable(field)}={_shown(model, field, value)} is not allowed"
        line += f" (at {where.lstrip('.')})" if where else ""
        line += f": {_allowed(model, field, error.get('msg', 'invalid'))}"
        lines.setdefault(f"{field}{where}", line)
    return list(lines.values())


_FIELD = re.compile(r'field "([a-z0-9_]+)"')


def describe_parse_error(
    model: type[BaseModel], exc: Exception, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """pydantic-settings' error for a variable that is no JSON where JSON is
    needed (a list, a map): the field, and one line."""
    environ = os.environ if environ is None else environ
    found = _FIELD.search(str(exc))
    if not found or found.group(1) not in model.model_fields:
        return None, f"a PIER_ setting could not be read: {exc}"
    field = found.group(1)
    value = _given(field, "", environ, {})
    cause = f" ({exc.__cause__})" if exc.__cause__ else ""
    allowed = _allowed(model, field, "write it as JSON" + cause)
    return field, f"{variable(field)}={_shown(model, field, value)} is not allowed: {allowed}"


def unknown_variables(model: type[BaseModel], names: Iterable[str]) -> list[str]:
    """A warning for each PIER_* name pier does not read, with the closest it does."""
    known = known_variables(model)
    warnings = []
    for name in sorted({n for n in names if n.upper().startswith(PREFIX)}):
        upper = name.upper()
        if upper in known or upper.startswith(OTHER_PREFIXES):
            continue
        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.6)
        hint = f": did you mean {close[0]}?" if close else " (docs/settings.md lists every setting)"
        warnings.append(f"{name} is not a pier setting and is ignored{hint}")
    return warnings


def dotenv_values(path: Path) -> dict[str, str | None]:
    """The variables a `.env` file sets (as pydantic-settings reads it)."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values as read

    return dict(read(path))
