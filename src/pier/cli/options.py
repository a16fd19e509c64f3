"""Options more than one `pier` command reads the same way."""

from __future__ import annotations

from pier.errors import InputError


def parse_vars(pairs: list[str]) -> dict[str, str]:
    """`--var NAME=VALUE` options as {NAME: VALUE}; InputError naming a malformed one."""
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--var {pair!r} must look like NAME=VALUE")
        result[name.strip()] = value
    return result
