"""Node + npm for npm-based agent CLIs, and uv for Python-based ones, installed
at run time where the image has none (or, for Node, one too old). Each script is
the snapshot recipes' own step (recipes/_node22.Dockerfile, recipes/_uv.Dockerfile),
so the pinned versions and checksums exist once."""

from __future__ import annotations

import shlex
from functools import cache
from importlib import resources

NODE_RECIPE = "recipes/_node22.Dockerfile"
UV_RECIPE = "recipes/_uv.Dockerfile"


def node_install_script() -> str:
    return recipe_script(NODE_RECIPE)


def uv_install_script() -> str:
    return recipe_script(UV_RECIPE)


@cache
def recipe_script(recipe: str) -> str:
    """The recipe's steps as one shell `&&` list (RUN in a subshell, ENV as export),
    so `script || handle_failure` works."""
    text = resources.files("pier.sandbox").joinpath(recipe).read_text()
    return " &&\n".join(_instructions(text, recipe))


def _instructions(dockerfile: str, recipe: str) -> list[str]:
    lines: list[str] = []
    joined = ""
    for raw in dockerfile.splitlines():
        if not joined and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.endswith("\\"):
            joined += raw[:-1]
            continue
        joined += raw
        lines.append(_as_shell(joined.strip(), recipe))
        joined = ""
    return [line for line in lines if line]


def _as_shell(instruction: str, recipe: str) -> str:
    keyword, _, rest = instruction.partition(" ")
    if keyword == "RUN":
        # A shell of its own, as Docker's RUN is: in a `( ... )` subshell that is
        # part of `&&`/`||` (how the installers use these steps) bash ignores the
        # step's `set -e`, so a failed download or checksum went on to unpack and
        # install what it had (seen with no network: a traceback, then the fallback).
        return f"/bin/sh -c {shlex.quote(rest.strip())}"
    if keyword == "ENV":
        return f"export {rest.strip()}"
    raise ValueError(f"{recipe}: pier cannot run a {keyword} step at run time")
