"""Follow one run request through preflight (what the CLI and the API call before
they accept a run) as a reader would, and count the moves.

    uv run python scripts/call_path.py [pyproject.toml]    # DEPTH=3 for the outline

It runs preflight on a small runbook with a profiler on and records every call
into a pier function (comprehensions, lambdas and dunders left out) and every
return to its caller. A *move* is a call or a return that changes module; it is
*back up* when it lands in a higher layer (pyproject.toml's import-linter
layers) than the module it leaves. DEPTH limits how deep calls are followed
(preflight is 1): 3 is the outline a reader follows to see how a plan is built.
The longest call path is the deepest stack of pier functions under preflight."""

from __future__ import annotations

import inspect
import os
import sys
import tomllib
from collections import Counter
from itertools import pairwise
from pathlib import Path

from pier.lifecycle import start
from pier.runbook.parse import parse
from pier.settings import Settings
from pier.tasks.build import task_from_runbook

RUNBOOK = "---\nagent: script\nvars: {who: world}\n---\nSay hello.\n\n```bash\necho {{who}} > out.md\n```\n"
DEPTH = int(os.environ.get("DEPTH", "99"))


def layer_of(ranks: dict[str, int], module: str) -> int | None:
    matches = [
        (len(name), row) for name, row in ranks.items() if module == name or module.startswith(name + ".")
    ]
    return max(matches)[1] if matches else None


def trace(call) -> tuple[list[str], list[tuple[str, str]]]:
    """The modules the reader is in, move by move, and the deepest stack."""
    stack: list[tuple[str, str]] = []
    visited: list[str] = []
    deepest: list[tuple[str, str]] = []

    def profile(frame, event, _arg):
        nonlocal deepest
        module, name = frame.f_globals.get("__name__", ""), frame.f_code.co_name
        if event not in ("call", "return") or not module.startswith("pier"):
            return
        if name.startswith("<") or (name.startswith("__") and name.endswith("__")):
            return
        if event == "call":
            stack.append((module, name))
            if len(stack) <= DEPTH:
                visited.append(module)
            deepest = max(deepest, list(stack), key=len)
        elif stack and stack[-1] == (module, name):
            stack.pop()
            if stack and len(stack) < DEPTH:
                visited.append(stack[-1][0])

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return visited, deepest


def main() -> None:
    pyproject = Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
    layers = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    ranks = {name.strip(): row for row, names in enumerate(layers) for name in names.split(":")}
    settings = Settings()
    runbook = parse(RUNBOOK)
    if "default_snapshot" in inspect.signature(task_from_runbook).parameters:
        task = task_from_runbook(runbook, default_snapshot=settings.default_snapshot)
    else:  # before the default snapshot was handed in
        task = task_from_runbook(runbook)
    visited, deepest = trace(lambda: start.preflight(start.RunRequest("c", "t", task), settings))
    path = [m for m, after in zip(visited, [*visited[1:], None], strict=True) if m != after]
    moves = list(pairwise(path))
    up = Counter((a, b) for a, b in moves if (layer_of(ranks, b) or 0) < (layer_of(ranks, a) or 0))
    print("reader's path:", " -> ".join(m.removeprefix("pier.") for m in path))
    print(
        f"modules: {len(set(visited))}; moves between modules: {len(moves)}; back up a layer: {sum(up.values())}"
    )
    for (a, b), count in up.most_common():
        print(f"   up x{count}: {a} -> {b}")
    chain = [m for i, (m, _) in enumerate(deepest) if i == 0 or deepest[i - 1][0] != m]
    print(
        f"longest call path: {len(deepest)} pier functions, {len(chain) - 1} module changes: "
        + " -> ".join(m.removeprefix("pier.") for m in chain)
    )
    for module, name in deepest:
        print(f"   {module}.{name}")


if __name__ == "__main__":
    main()
