from pathlib import Path

import pytest

from pier.errors import RunbookError
from pier.runbook import load, parse, render, variables

GOOD = """---
version: 1.0
agent: claude-code
model: anthropic/claude-sonnet-4.6
primary_outputs: report.md
secrets:
  API_KEY: {env: MY_KEY, description: key, required: true}
flavour: extra
vars: {topic: rust}
---
# Do it
Write {{ results_dir }}/report.md about {{topic}} using {{secrets.API_KEY}}.
Code: {{ not_a_var }} and {{ a | b }}.
"""


def test_known_keys_are_typed_and_unknown_kept():
    runbook = parse(GOOD)
    front = runbook.frontmatter
    assert front.version == "1.0"
    assert front.primary_outputs == ["report.md"]
    assert front.secrets["API_KEY"].env == "MY_KEY" and front.secrets["API_KEY"].required
    assert front.unknown_keys == ["flavour"]
    assert runbook.warnings == ("unknown frontmatter key 'flavour' (kept, not used)",)
    assert runbook.body.startswith("# Do it")


def test_render_fills_known_and_leaves_unknown():
    runbook = parse(GOOD)
    out = render(runbook.body, variables(runbook.frontmatter.vars, {"API_KEY": "s3cr3t"}))
    assert "/app/results/report.md about rust using s3cr3t." in out.text
    assert "{{ not_a_var }}" in out.text and "{{ a | b }}" in out.text
    # `{{ a | b }}` is another tool's template text, not a variable: never reported.
    assert out.unfilled == ("not_a_var",)


def test_builtin_dirs_cannot_be_moved_by_vars():
    out = render("{{results_dir}}", variables({"results_dir": "/tmp/elsewhere"}))
    assert out.text == "/app/results"


def test_no_frontmatter_is_all_body():
    runbook = parse("# just text\n")
    assert runbook.body == "# just text\n" and runbook.frontmatter.agent is None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("---\nagent: x\nmodel: [unclosed\n---\nbody", 3, "not valid YAML"),
        ("---\nagent: x\n", 1, "never closed"),
        ("---\n- a\n- b\n---\n", 2, "mapping"),
        ("---\nagent: x\ntimeout_sec: -5\n---\n", 3, "timeout_sec"),
    ],
)
def test_malformed_frontmatter_names_the_line(text, line, words):
    with pytest.raises(RunbookError) as info:
        parse(text, path="R.md")
    assert info.value.line == line
    assert words in str(info.value) and f"R.md:{line}" in str(info.value)


def test_load_folder_and_missing(tmp_path: Path):
    (tmp_path / "RUNBOOK.md").write_text(GOOD)
    assert load(tmp_path).frontmatter.agent == "claude-code"
    with pytest.raises(RunbookError, match="no such file or folder"):
        load(tmp_path / "nothing-here")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunbookError, match=r"no RUNBOOK\.md in this folder"):
        load(empty)
