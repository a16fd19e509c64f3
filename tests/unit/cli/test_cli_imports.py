"""`pier --help` starts fast because `pier.cli` imports only typer: the heavy
libraries load in the command that needs them. A fresh interpreter shows what
an import really pulls in (this process has loaded everything already)."""

import json
import subprocess
import sys

HEAVY = ("sqlalchemy", "docker", "fastapi", "pydantic", "rich", "uvicorn", "httpx", "yaml")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_loads_no_heavy_library():
    assert loaded_after("import pier.cli") & set(HEAVY) == set()


def test_help_loads_no_heavy_library_but_rich():
    code = (
        "from pier.cli import app\ntry:\n    app(['--help'], prog_name='pier')\nexcept SystemExit:\n    pass"
    )
    # typer formats its help with rich; nothing else is needed to print it.
    assert loaded_after(code) & set(HEAVY) == {"rich"}


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a module that imports SQLAlchemy is caught."""
    assert "sqlalchemy" in loaded_after("import pier.db")
