"""Shell completion installs for `uv run pier` too (the docs' way to call it,
with no `pier` on PATH): in bash, completing after `uv run pier` asks pier, as
completing after `pier` does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PIER = Path(sys.executable).with_name("pier")


def pier(*args: str, home: Path, shell: str = "bash") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "SHELL": f"/bin/{shell}",
        "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1",
    }
    return subprocess.run([str(PIER), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def uv_on_path(tmp_path: Path) -> Path:
    """A `uv` that runs this checkout's pier for `uv run pier ...` (and counts its calls)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    uv = folder / "uv"
    uv.write_text(
        f'#!/bin/sh\necho x >> "{tmp_path}/uv-calls"\n[ "$1" = run ] && [ "$2" = pier ] && shift 2 && exec "{PIER}" "$@"\nexit 2\n'
    )
    uv.chmod(0o755)
    return folder


def complete(script: Path, words: list[str], path: Path) -> list[str]:
    line = " ".join(words)
    shell = f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _pier_completion_uv; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    done = subprocess.run(["bash", "-c", shell], env={**os.environ, "PATH": f"{path}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(
    shutil.which("bash") is None or not PIER.is_file(), reason="needs bash and the pier script"
)
def test_bash_completion_after_uv_run_pier_completes_pier(tmp_path, uv_on_path):
    installed = pier("--install-completion", "bash", home=tmp_path)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "pier.sh"
    text = script.read_text()
    assert "complete -o default -F _pier_completion pier" in text  # `pier` on PATH, as before
    assert "complete -o default -F _pier_completion_uv uv" in text  # and `uv run pier`
    assert complete(script, ["uv", "run", "pier", "ru"], uv_on_path) == ["run", "runs"]
    assert "--limit" in complete(script, ["uv", "run", "pier", "runs", "--li"], uv_on_path)
    assert (tmp_path / "uv-calls").read_text().count("x") == 2


def test_zsh_completion_covers_uv_run_pier_too(tmp_path):
    shown = pier("--show-completion", "zsh", home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert (
        "compdef _pier_completion pier" in shown.stdout and "compdef _pier_completion_uv uv" in shown.stdout
    )
    assert "uv run pier" in shown.stdout and "_uv" in shown.stdout  # uv's own completion elsewhere
