"""`pier validate` reports every problem of a runbook in one pass, each at
file:line:column where it has one, with its fix."""

from pathlib import Path

from typer.testing import CliRunner

from pier.cli import app

runner = CliRunner()

BROKEN = """---
agent: nobody
timeout_sec: -5
cpus: lots
colour: red
checks:
  - name: a
    type: bogus
vars:
  who: x
---
```bash
echo {{whom}}
```
"""


def validate(path: Path) -> list[str]:
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "60"})
    return result.output.splitlines()


def test_every_error_and_warning_in_one_pass_each_at_its_place(tmp_path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(BROKEN)
    lines = validate(path)
    expected = [
        f"{path}:3:1: error: frontmatter key 'timeout_sec': -5 is not a time limit",
        f"{path}:4:1: error: frontmatter key 'cpus': 'lots' is not a number of CPUs",
        f"{path}:2:1: error: agent 'nobody' is not available; choose one of",
        f"{path}:13: error: {{{{whom}}}} is not one of the runbook's variables (who): declare it",
        f"{path}:7:5: error: checks[0] 'a': type 'bogus' is not known; use one of",
        f"{path}:5:1: warning: unknown frontmatter key 'colour'",
    ]
    for start in expected:
        assert any(line.strip().startswith(start) for line in lines), (start, lines)
    # Not wrapped at 60 columns when the output is not a terminal: one line each.
    assert lines[-1] == "1 runbook(s), 1 with errors" and len(lines) == len(expected) + 2, lines


def test_an_unclosed_list_is_reported_where_it_opens(tmp_path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(
        '---\nagent: script\nsnapshot: ""\ntimeout_sec: 100\nvars:\n  items: [a, b\nprimary_outputs: [x]\n---\nbody\n'
    )
    lines = validate(path)
    assert (
        lines[1]
        .strip()
        .startswith(
            f"{path}:6:10: error: frontmatter is not valid YAML: the list opened here "
            "is not closed before line 7"
        )
    ), lines
