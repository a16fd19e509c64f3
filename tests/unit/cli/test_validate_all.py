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


F = "```"
CODE_CHECKS = f"""---
evaluation: programmatic
strict_evaluation: true
agent: script
snapshot: python312-uv-node
secrets:
  GH:
    env: GH_TOKEN
code_checks:
  timeout_sec: 1000
  sources:
    - name: checks
      type: git
      url: https://github.com/acme/output-checks
      secret: GITHUB_TOKEN
checks:
  - name: own
    type: regex
    path: a.md
    pattern: "{{{{nope}}}}"
---
# T

{F}bash
echo hi
{F}

## Code Checks

### outputs-exist — outputs

{F}bash
test -s {{{{results_dir}}}}/a {{{{checks_dir}}}}
{F}

### nofence — nothing here

### dup — one
{F}bash
true
{F}
### dup — two
{F}bash
true
{F}

### use — bad use
{F}yaml
use: min_sizes
{F}

### look — look
{F}agent
Look.
{F}
"""


def test_the_platforms_contract_is_checked_each_problem_at_its_place(tmp_path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(CODE_CHECKS)
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 1
    for expected in (
        f"{path}:10:3: error: code_checks.timeout_sec: Input should be less than or equal to 900",
        f"{path}:15:7: error: code_checks.sources.0.secret: 'GITHUB_TOKEN' is not declared under secrets",
        f"{path}:36:1: error: ## Code Checks: check nofence: has no fenced block",
        f"{path}:42:1: error: ## Code Checks: check dup#4: two checks have the id 'dup'",
        f"{path}:47:1: error: ## Code Checks: check use: use: 'min_sizes' is not a built-in",
    ):
        assert expected in result.output, (expected, result.output)


def test_strict_agent_checks_and_unfilled_placeholders_are_reported(tmp_path):
    path = tmp_path / "RUNBOOK.md"
    fixed = CODE_CHECKS.replace("timeout_sec: 1000", "timeout_sec: 100").replace(
        "secret: GITHUB_TOKEN", "secret: GH"
    )
    fixed = fixed.split("### nofence")[0] + "### look — look\n" + fixed.split("### look — look\n")[1]
    path.write_text(fixed)
    result = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert f"{path}:20:5: warning: checks[0].pattern: {{{{nope}}}} is not filled" in result.output
    assert f"{path}:36:1: warning: check look is the agent's, and the script agent runs only" in result.output


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
