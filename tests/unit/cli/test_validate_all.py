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


SCRIPT_BODY = "# Task\n\n```bash\necho hi\n```\n"


def test_an_unknown_snapshot_is_reported_at_its_key_with_the_names_pier_knows(tmp_path):
    """The run would fall through to a generated Dockerfile with a warning; validate
    says so before anything runs (three runbooks of the corpus name such a snapshot)."""
    path = tmp_path / "RUNBOOK.md"
    path.write_text(f"---\nagent: script\nsnapshot: python311-uv\n---\n{SCRIPT_BODY}")
    found = [line for line in validate_wide(path) if "python311-uv" in line]
    assert found == [
        f"{path}:3:1: warning: snapshot 'python311-uv' not found, falling through to a generated "
        "Dockerfile (the snapshots pier knows: prism-playwright, python312-uv; see `pier snapshot list`)"
    ]


def test_packages_a_snapshot_or_an_image_ignores_are_reported(tmp_path):
    default = tmp_path / "a" / "RUNBOOK.md"  # no snapshot: the default one, which ignores both lists
    default.parent.mkdir()
    default.write_text(
        f"---\nagent: script\napt_packages: [jq]\npip_packages: [requests]\n---\n{SCRIPT_BODY}"
    )
    image = tmp_path / "b" / "RUNBOOK.md"
    image.parent.mkdir()
    image.write_text(
        f'---\nagent: script\nsnapshot: ""\nimage: acme/env:1\npip_packages: [requests]\n---\n{SCRIPT_BODY}'
    )
    lines = validate_wide(tmp_path)
    assert any(
        line.startswith(f"{default}:3:1: warning: apt_packages and pip_packages had no effect")
        and "snapshot 'python312-uv'" in line
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{image}:5:1: warning: pip_packages had no effect") and "image acme/env:1" in line
        for line in lines
    ), lines


def test_packages_for_a_generated_dockerfile_are_not_reported(tmp_path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(f'---\nagent: script\nsnapshot: ""\napt_packages: [jq]\n---\n{SCRIPT_BODY}')
    assert not [line for line in validate_wide(path) if "warning" in line]


def validate_wide(path: Path) -> list[str]:
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "400"})
    return [line.strip() for line in result.output.splitlines()]
