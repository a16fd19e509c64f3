"""pier's import graph by package: cycles, and imports that point back up the
layers of pyproject.toml's import-linter contract (docs/architecture.md).

    uv run python scripts/import_graph.py [pyproject.toml]

A package is `pier.<name>` (a subpackage or a top-level module); an edge is any
import from one package's modules into another's, type-only ones included."""

from __future__ import annotations

import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import grimp


def layer_ranks(pyproject: Path) -> dict[str, int]:
    """{package: row of the layers contract}, 0 the top row."""
    layers = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    return {name.strip(): row for row, names in enumerate(layers) for name in names.split(":")}


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> None:
    ranks = layer_ranks(Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"))
    graph = grimp.build_graph("pier")
    modules = {
        m: {t for t in graph.find_modules_directly_imported_by(m) if t.startswith("pier")}
        for m in graph.modules
    }
    packages: dict[str, set[str]] = defaultdict(set)
    imports: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source, targets in modules.items():
        for target in targets:
            a, b = package(source), package(target)
            if a != b:
                packages[a].add(b)
                imports[a, b].append(f"{source} -> {target}")
    back = [(a, b) for a, b in imports if a in ranks and b in ranks and ranks[b] < ranks[a]]
    print(
        f"packages: {len({*packages, *(b for t in packages.values() for b in t)})}, "
        f"package edges: {len(imports)}, module imports across packages: {sum(map(len, imports.values()))}"
    )
    print("package cycles:", cycles(packages) or "none")
    print("module cycles:", cycles(modules) or "none")
    print(f"imports back up the layers: {sum(len(imports[e]) for e in back)}")
    for edge in back:
        print("  " + "\n  ".join(imports[edge]))


if __name__ == "__main__":
    main()
