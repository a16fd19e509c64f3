"""Node + npm for npm-based agent CLIs, installed at run time where the image has
none (or one too old). The script is the snapshot recipes' own Node step, so the
pinned versions and checksums exist once."""

from __future__ import annotations

from functools import cache
from importlib import resources

NODE_RECIPE = "recipes/_node22.Dockerfile"


@cache
def node_install_script() -> str:
    """The recipe's steps as one shell `&&` list (RUN in a subshell, ENV as export),
    so `script || handle_failure` works."""
    text = resources.files("pier.sandbox").joinpath(NODE_RECIPE).read_text()
    return " &&\n".join(_instructions(text))


def _instructions(dockerfile: str) -> list[str]:
    lines: list[str] = []
    joined = ""
    for raw in dockerfile.splitlines():
        if not joined and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.endswith("\\"):
            joined += raw[:-1]
            continue
        joined += raw
        lines.append(_as_shell(joined.strip()))
        joined = ""
    return [line for line in lines if line]


def _as_shell(instruction: str) -> str:
    keyword, _, rest = instruction.partition(" ")
    if keyword == "RUN":
        return f"( {rest.strip()} )"
    if keyword == "ENV":
        return f"export {rest.strip()}"
    raise ValueError(f"{NODE_RECIPE}: pier cannot run a {keyword} step at run time")
