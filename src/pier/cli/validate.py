"""`pier validate`: runbooks checked without Docker (the checks: pier.cli.lint)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.console import out


def validate_command(
    paths: Annotated[list[Path], typer.Argument(help="runbook files or folders (searched recursively)")],
) -> None:
    """Parse, render and plan runbooks without running them; exit 1 when any has an error."""
    from pier.cli.lint import validate_paths

    errors = validate_paths(paths, out)
    raise typer.Exit(1 if errors else 0)
