"""The documentation site builds with no broken link (mkdocs --strict: a link to
a missing page or anchor fails it), takes pages no one listed, and the README
stays short."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(source / "mkdocs.yml"),
            "-d",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_site_builds_strict_with_every_link_found(tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    for page in ("first-runbook", "runbook-format", "cli", "api", "settings"):
        assert (tmp_path / "site" / f"{page}.html").is_file(), page


def test_the_site_searches_when_opened_from_disk(tmp_path):
    """Search fetched its index over HTTP, which a page opened from disk (file://)
    cannot: the index is a script beside the pages, which each page loads."""
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    index = tmp_path / "site" / "search" / "search_index.js"
    assert index.read_text().startswith("var __index = ") and "exit code" in index.read_text()
    page = (tmp_path / "site" / "cli.html").read_text()
    assert 'href="runbook-format.html' in page  # links name files, not folders a browser cannot open
    # tests/integration/web/test_docs_offline.py searches it in Chromium from file://


def test_a_page_no_one_listed_joins_the_site_and_a_broken_link_fails_it(tmp_path):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs")
    (copy / "docs" / "a-new-helper-page.md").write_text("# A new page\n\nSee [the CLI](cli.md).\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "a-new-helper-page" in (tmp_path / "site" / "index.html").read_text()  # in the nav
    (copy / "docs" / "a-new-helper-page.md").write_text("# A new page\n\nSee [nothing](no-such-page.md).\n")
    broken = build(copy, tmp_path / "site2")
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
