"""The command blocks of the README's quickstart and of docs/first-runbook.md
run as written, in order, on Docker, and print what the page says they print.

A ```bash block is run unless an HTML comment just before it says
`not run by the docs test` (with the reason); each `<!-- expect: TEXT -->`
after a block is text its output must contain. The blocks run in a folder
holding a copy of examples/, with `uv run` pointed at this clone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(`{3,})bash\s*$")
SKIP = "not run by the docs test"


def blocks(page: Path) -> list[tuple[str, list[str]]]:
    """(script, expected texts) of each block of `page` the test runs."""
    lines = page.read_text().splitlines()
    found: list[tuple[str, list[str]]] = []
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        skipped = index > 0 and SKIP in lines[index - 1]
        end = lines.index(opened.group(1), index + 1)
        script = "\n".join(lines[index + 1 : end])
        expected = []
        after = end + 1
        while after < len(lines) and lines[after].startswith("<!-- expect: "):
            expected.append(lines[after].removeprefix("<!-- expect: ").removesuffix(" -->"))
            after += 1
        if not skipped:
            found.append((script, expected))
        index = after
    return found


@pytest.mark.parametrize("page", ["README.md", "docs/first-runbook.md"])
def test_every_command_block_runs_as_written(page, tmp_path, pier_home, docker_backend, base_image):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    env = {
        **os.environ,
        "UV_PROJECT": str(ROOT),
        "PIER_HOME": str(pier_home),
        "PIER_BASE_IMAGE": base_image,
        "PIER_SNAPSHOT_BASE_IMAGE": base_image,
    }
    env.pop("PIER_SANDBOX_BACKEND", None)
    found = blocks(ROOT / page)
    assert found, f"{page} has no block to run"
    for script, expected in found:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, (page, script, output[-3000:])
        for text in expected:
            assert text in output, (page, script, text, output[-3000:])


def test_blocks_are_found_as_the_pages_mean_them():
    readme = blocks(ROOT / "README.md")
    assert all("uv run pytest" not in script for script, _ in readme)  # the suite is not run by itself
    assert any("--var name=Ada --file notes.txt" in script for script, _ in readme)
    guide = blocks(ROOT / "docs" / "first-runbook.md")
    assert len(guide) == 4 and "```bash" in guide[0][0]  # a runbook's own blocks stay inside its heredoc
