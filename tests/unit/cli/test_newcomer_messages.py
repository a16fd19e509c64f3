"""The messages a newcomer met that said the wrong thing or said it garbled
(issue 37, item 6), each now saying what is wrong and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier import cli, limits

runner = CliRunner()
GOOD = "---\nagent: script\n---\n```bash\necho hi > {{results_dir}}/x\n```\n"


def said(result) -> str:
    return " ".join(result.output.split())  # rich wraps on a narrow terminal


def test_a_2_gb_attachment_is_refused_in_one_plain_sentence(tmp_path: Path):
    """It read: "attached files may make a file may be at most 512.0 MiB"."""
    (tmp_path / "RUNBOOK.md").write_text(GOOD)
    big = tmp_path / "big.bin"
    with open(big, "wb") as out:  # sparse: 2 GiB on no disk
        out.truncate(2 << 30)
    done = runner.invoke(cli.app, ["run", str(tmp_path / "RUNBOOK.md"), "--file", str(big)])
    assert done.exit_code == 2
    text = said(done)
    assert (
        "big.bin is 2.0 GiB, more than one attached file may be (at most 512.0 MiB, PIER_MAX_ASSET_FILE_BYTES): "
        "it was refused before anything was copied or extracted." in text
    ), text
    assert (
        "may make a file may be" not in text and "ask the operator to raise PIER_MAX_ASSET_FILE_BYTES" in text
    )


@pytest.mark.parametrize(("cpus", "told"), [(2, "and this machine has 2 (a run here gets at most 2): ask for at most 2"),
                                            (128, "(at most 64, PIER_MAX_CPUS): ask for at most 64")])  # fmt: skip
def test_cpus_999_names_this_machines_cpus_not_only_the_operators_ceiling(tmp_path, monkeypatch, cpus, told):
    """On a 2-CPU machine it cited a limit of 64 (PIER_MAX_CPUS) as the machine's."""
    monkeypatch.setattr(limits, "host_cpus", lambda: cpus)
    (tmp_path / "RUNBOOK.md").write_text(GOOD.replace("agent: script", "agent: script\ncpus: 999"))
    done = runner.invoke(cli.app, ["validate", str(tmp_path / "RUNBOOK.md")])
    assert done.exit_code == 1
    text = said(done)
    assert "999 CPUs is more than pier allows a run (at most 64, PIER_MAX_CPUS)" in text and told in text, (
        text
    )
    assert "more than this machine allows (64" not in text


def test_a_file_that_is_not_a_runbook_is_told_so_not_that_it_names_no_agent(tmp_path):
    notes = tmp_path / "NOTES.md"
    notes.write_text("# Meeting notes\n\nNothing to run here.\n")
    for argv in (["validate", str(notes)], ["run", str(notes)]):
        text = said(runner.invoke(cli.app, argv))
        assert "this file has no frontmatter" in text and "probably not a runbook" in text, text
        assert "names no agent" not in text
    # a runbook with frontmatter but no agent still hears that, and how to give one
    (tmp_path / "R.md").write_text("---\ntitle: x\n---\n```bash\ntrue\n```\n")
    text = said(runner.invoke(cli.app, ["validate", str(tmp_path / "R.md")]))
    assert "names no agent" in text and "pier run --agent NAME" in text
