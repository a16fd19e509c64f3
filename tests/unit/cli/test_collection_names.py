"""One rule for collection names: what `pier run --collection` accepts, the API
accepts too (a CLI run in a collection the API refuses could never be served)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from pier.api.schemas.collections import CollectionCreate
from pier.cli import app
from pier.errors import InputError
from pier.lifecycle.start import RunRequest, preflight
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

NAMES = ["team-a", "Team_1.v2", "a b", "-x", "_x", ".x", "x" * 128, "x" * 129, "café", "a:b", "a/b", ""]
RUNBOOK = "---\nagent: script\n---\n```bash\ntrue\n```\n"


def api_accepts(name: str) -> bool:
    try:
        CollectionCreate(name=name)
    except ValidationError:
        return False
    return True


def run_accepts(name: str) -> bool:
    request = RunRequest(collection=name, task_name="t", task=task_from_runbook(parse(RUNBOOK)))
    try:
        preflight(request, get_settings())
    except InputError:
        return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_run_and_api_agree_on_collection_names(name):
    assert run_accepts(name) == api_accepts(name)


def test_a_refused_collection_name_is_exit_2_saying_the_rule(tmp_path: Path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(RUNBOOK)
    result = CliRunner().invoke(app, ["run", str(path), "--collection", "my team"], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "invalid collection name 'my team': use letters, digits" in result.output
