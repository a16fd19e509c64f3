"""`pier --help` starts fast because `pier.cli` and its command modules import
only typer: the heavy libraries load in the command that needs them. A fresh interpreter shows what
an import really pulls in (this process has loaded everything already)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

HEAVY = ("sqlalchemy", "docker", "fastapi", "pydantic", "rich", "uvicorn", "httpx", "yaml")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_loads_no_heavy_library():
    assert loaded_after("import pier.cli") & set(HEAVY) == set()


def test_help_loads_no_heavy_library():
    code = (
        "from pier.cli import app\ntry:\n    app(['--help'], prog_name='pier')\nexcept SystemExit:\n    pass"
    )
    # The help is click's plain text: not even rich is needed to print it.
    assert loaded_after(code) & set(HEAVY) == set()


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a module that imports SQLAlchemy is caught."""
    assert "sqlalchemy" in loaded_after("import pier.db")


# What a command that only reads may not load: the runner and its stages, the
# model gateway's server, the egress proxy, the API, Temporal, the price tables.
RUN_PATH = (
    "pier.lifecycle.runner",
    "pier.lifecycle.stages",
    "pier.lifecycle.start",
    "pier.gateway.server",
    "pier.egress.proxy",
    "pier.api",
    "pier.executors",
)
RUN_LIBRARIES = {"fastapi", "uvicorn", "httpx", "temporalio", "cryptography", "genai_prices", "boto3"}
READ_ONLY = {
    # command: the heavy libraries it needs for its own work
    ("--help",): set(),
    ("runs",): {"sqlalchemy", "pydantic", "rich"},
    ("logs", "0123456789abcdef"): {"sqlalchemy", "pydantic", "rich"},
    ("routine", "list"): {"sqlalchemy", "pydantic", "rich"},
    ("validate", "examples/hello"): {"pydantic", "yaml", "rich"},
    ("snapshot", "list"): {"docker", "pydantic", "yaml", "rich"},
    ("snapshot", "layers"): {"docker", "pydantic", "rich"},
}


def loaded_by_command(argv: tuple[str, ...], home) -> tuple[set[str], set[str]]:
    """(top-level libraries, pier modules) a fresh `pier ARGV` loaded, whatever it exited."""
    modules = modules_loaded_by(argv, home)
    return {m.split(".")[0] for m in modules}, {m for m in modules if m.startswith("pier.")}


def modules_loaded_by(argv: tuple[str, ...], home) -> set[str]:
    """Every module a fresh `pier ARGV` loaded, whatever it exited."""
    code = (
        "import sys, json\nfrom pier.cli import app\n"
        f"try:\n    app({list(argv)!r}, prog_name='pier')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)"
    )
    env = {**os.environ, "PIER_HOME": str(home), "PIER_SANDBOX_BACKEND": "docker"}
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):  # would make rich take the pipe for a terminal
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT)  # fmt: skip
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A PIER_HOME whose database is at head already (a first call migrates: alembic)."""
    from pier.db import Store

    folder = tmp_path_factory.mktemp("home")
    Store.open(f"sqlite:///{folder / 'pier.db'}").engine.dispose()
    return folder


@pytest.mark.parametrize("argv", sorted(READ_ONLY), ids=" ".join)
def test_a_command_that_only_reads_loads_only_what_it_uses(argv, home):
    libraries, modules = loaded_by_command(argv, home)
    assert libraries & (set(HEAVY) | RUN_LIBRARIES | {"alembic"}) <= READ_ONLY[argv], argv
    assert not [m for m in modules if any(m == p or m.startswith(f"{p}.") for p in RUN_PATH)], argv


def test_the_command_probe_sees_the_run_path(tmp_path):
    """The check above can fail: `pier run` loads the runner (it exits at its bad input)."""
    _, modules = loaded_by_command(("run", str(tmp_path / "missing")), tmp_path)
    assert "pier.lifecycle.runner" in modules


# What each read-only command must not load besides (its output piped, as here):
# rich when it prints only plain lines, the process table (psutil) and the
# sandbox package when no run is unfinished (the orphan check has nothing to judge),
# the PostgreSQL dialect on a SQLite store, and SQLAlchemy's ORM (the store
# reads and writes through Core tables: pier.db.tables).
ON_SQLITE = {"sqlalchemy.dialects.postgresql"}
STORE = {"sqlalchemy.orm"} | ON_SQLITE
NOT_LOADED = {
    ("runs",): {"rich", "psutil", "pier.sandbox", "pier.lifecycle.outcomes", "pier.lifecycle.scratch"}
    | STORE,
    ("logs", "0123456789abcdef"): {"psutil", "pier.sandbox", "pier.lifecycle.outcomes"} | STORE,
    ("routine", "list"): {"rich", "psutil", "pier.sandbox", "pier.lifecycle.orphans"} | STORE,
}


@pytest.mark.parametrize("argv", sorted(NOT_LOADED), ids=" ".join)
def test_a_read_command_loads_nothing_it_does_not_use(argv, home):
    modules = modules_loaded_by(argv, home)
    loaded = modules | {m.split(".")[0] for m in modules}
    assert NOT_LOADED[argv] & loaded == set(), argv
