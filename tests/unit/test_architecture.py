"""The repository describes itself: its import layers hold (lint-imports), the
layer table of docs/architecture.md names exactly the packages that exist, in the
rows pyproject.toml's contract has, and no file cites a document outside it."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pier"
DOC = ROOT / "docs" / "architecture.md"


def test_imports_point_down_the_layers():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _packages() -> set[str]:
    """Every module and package directly under pier."""
    found = {f"pier.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    return found | {f"pier.{p.name}" for p in SRC.iterdir() if (p / "__init__.py").exists()}


def _doc_layers() -> list[list[str]]:
    """The layer table's rows, top first: the `pier.x` names in its packages column."""
    section = DOC.read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    return [re.findall(r"`(pier[\w.*]*)`", cells[2]) for cells in rows[2:]]  # after the header and its rule


def _expand(names: list[str], packages: set[str]) -> set[str]:
    return {p for name in names for p in packages if fnmatch.fnmatchcase(p, name)}


def test_every_package_in_the_layer_table_exists_and_every_package_is_in_it():
    packages = _packages()
    named = [name for row in _doc_layers() for name in row]
    assert named, "docs/architecture.md has no layer table"
    assert [n for n in named if not _expand([n], packages)] == []
    assert sorted(packages - _expand(named, packages)) == []


def test_the_layer_table_and_the_import_contract_have_the_same_rows():
    packages = _packages()
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    rows = [{name.strip() for name in row.split(":")} for row in contract["layers"]]
    assert [_expand(row, packages) for row in _doc_layers()] == rows


CITATION = re.compile(r"\bSPEC[\s_]+\d|DESIGN\.md|\.\./shared", re.IGNORECASE)


def test_nothing_cites_a_document_outside_the_repository():
    files = [
        *SRC.rglob("*.py"),
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "README.md",
        *(ROOT / "tests").rglob("*.py"),
    ]
    cited = [f"{p.relative_to(ROOT)}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if CITATION.search(line)]  # fmt: skip
    assert cited == []


# Who may read the global settings: the entry points, and the lifecycle's
# Services (what the CLI and the API share); everything else is handed them.
READS_SETTINGS = (
    "pier/cli",
    "pier/resident.py",
    "pier/api/",
    "pier/lifecycle/wiring.py",
    "pier/settings/__init__.py",
)


def test_only_entry_points_read_the_global_settings():
    readers = [str(p.relative_to(SRC.parent)) for p in SRC.rglob("*.py") if "get_settings" in p.read_text()]
    assert [r for r in readers if not r.startswith(READS_SETTINGS)] == []


# `pier logs` reads the runs `pier runs` lists: the one command kept in another's module.
BESIDE = {"logs": "runs"}


def test_each_command_is_in_the_module_of_its_name():
    """pier/cli/ mirrors the command tree: `pier X ...` is pier.cli.X."""
    from pier.cli import app

    found = {info.name: {info.callback.__module__} for info in app.registered_commands if info.callback}
    for group in app.registered_groups:
        commands = group.typer_instance.registered_commands
        found[group.name] = {info.callback.__module__ for info in commands if info.callback}
    assert found, "pier has no commands"
    assert {name: {f"pier.cli.{BESIDE.get(name, name)}"} for name in found} == found
