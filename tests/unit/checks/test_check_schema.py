"""The check schema: what a runbook may declare, and errors that name the check and field."""

import uuid
from pathlib import Path

import pytest

from pier.checks import check_isolation, load_checks, parse_checks, required_tools
from pier.checks.model import CodeCheck, JsonField, program_spec
from pier.cli.lint import validate_one
from pier.errors import InputError
from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import resolve, task_from_runbook


def test_every_type_parses_with_defaults():
    checks = parse_checks(
        [
            {"name": "a", "type": "file_exists", "path": "report.md"},
            {"name": "b", "type": "nonempty", "path": "./out/"},
            {"name": "c", "type": "json_valid", "path": "/app/results/data.json"},
            {"name": "d", "type": "json_field", "path": "v.json", "field": "overall_passed", "equals": True},
            {"name": "e", "type": "regex", "path": "report.md", "pattern": "^# ", "must_match": False},
            {"name": "f", "type": "code", "source": "https://example.org/c.git", "ref": "v1", "run": "true"},
        ]
    )
    assert [c.type for c in checks] == [
        "file_exists",
        "nonempty",
        "json_valid",
        "json_field",
        "regex",
        "code",
    ]
    assert [getattr(c, "path", None) for c in checks[:3]] == ["report.md", "out", "data.json"]
    assert all(c.timeout_sec == 300 for c in checks)
    assert [c.builtin for c in checks] == [True] * 5 + [False]


def test_program_spec_keeps_only_what_the_runbook_set():
    unset, null = parse_checks(
        [
            {"name": "a", "type": "json_field", "path": "v.json", "field": "x", "in": [1, 2], "min": 0},
            {"name": "b", "type": "json_field", "path": "v.json", "field": "x", "equals": None},
        ]
    )
    assert isinstance(unset, JsonField)
    assert program_spec(unset) == {
        "type": "json_field",
        "path": "v.json",
        "field": "x",
        "in": [1, 2],
        "min": 0,
    }
    assert program_spec(null) == {"type": "json_field", "path": "v.json", "field": "x", "equals": None}


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ({"name": "r", "type": "file_exists"}, "checks[0] 'r': `path` is required"),
        ({"name": "r", "type": "fle_exists", "path": "a"}, "type 'fle_exists' is not known"),
        ({"name": "r", "path": "a"}, "checks[0] 'r': `type` is missing"),
        (
            {"name": "r", "type": "regex", "path": "a", "pattern": "(unclosed"},
            "`pattern`: not a valid regular",
        ),
        ({"name": "r", "type": "file_exists", "path": "../etc/passwd"}, "`path`: '../etc/passwd' leaves"),
        ({"name": "r", "type": "file_exists", "path": "/etc/passwd"}, "must be a path inside the results"),
        (
            {"name": "r", "type": "file_exists", "path": "a", "colour": 1},
            "`colour` is not a field of a file_exists",
        ),
        ({"name": "no spaces", "type": "file_exists", "path": "a"}, "`name` must be 1-64 letters"),
        ({"name": "../up", "type": "file_exists", "path": "a"}, "`name` must be"),
        ({"type": "file_exists", "path": "a"}, "checks[0]: `name` is required"),
        ({"name": "r", "type": "json_field", "path": "a"}, "`field` is required"),
        ({"name": "r", "type": "json_field", "path": "a", "field": "x", "min": "low"}, "`min`"),
        ({"name": "r", "type": "code", "source": "https://x/y.git"}, "checks[0] 'r': `run` is required"),
        (
            {"name": "r", "type": "code", "source": "--upload-pack=x", "run": "true"},
            "`source`: must not start",
        ),
        ({"name": "r", "type": "code", "source": "a", "ref": "-f", "run": "true"}, "`ref`: must not start"),
        ({"name": "r", "type": "file_exists", "path": "a", "timeout_sec": 0}, "`timeout_sec`"),
        ({"name": "r", "type": "file_exists", "path": "a", "timeout_sec": 10**6}, "`timeout_sec`"),
        ("file_exists", "checks[0] must be a mapping"),
    ],
)
def test_errors_name_the_check_and_the_field(check, message):
    with pytest.raises(InputError) as caught:
        parse_checks([check])
    assert message in str(caught.value)


def test_names_are_unique():
    with pytest.raises(InputError, match=r"checks\[1\] 'a': two checks have this name"):
        parse_checks(
            [{"name": "a", "type": "nonempty", "path": "x"}, {"name": "a", "type": "nonempty", "path": "y"}]
        )


def test_checks_must_be_a_list():
    with pytest.raises(InputError, match="must be a list"):
        parse_checks({"name": "a"})


def test_isolation_is_same_or_fresh():
    assert check_isolation(None) == "same"
    assert check_isolation("fresh") == "fresh"
    with pytest.raises(InputError, match="checks_isolation 'separate'"):
        check_isolation("separate")


def test_local_sources_resolve_against_the_source_dir(tmp_path):
    (tmp_path / "tests").mkdir()
    raw = [{"name": "u", "type": "code", "source": "tests", "run": "true"}]
    (check,) = load_checks(raw, tmp_path)
    assert isinstance(check, CodeCheck) and check.source == str(tmp_path / "tests")
    remote = [{"name": "u", "type": "code", "source": "git@github.com:org/checks.git", "run": "true"}]
    assert load_checks(remote, None)[0].source == "git@github.com:org/checks.git"


def test_local_sources_are_refused_without_a_source_dir(tmp_path):
    raw = [{"name": "u", "type": "code", "source": str(tmp_path), "run": "true"}]
    with pytest.raises(
        InputError, match=r"check 'u': source .* is a local path, which only runs started with"
    ):
        load_checks(raw, None)


@pytest.mark.parametrize(
    ("source", "ref", "message"),
    [
        ("missing", None, "is not a folder or git repository"),
        ("plain", "v1", "ref 'v1' needs a git repository"),
    ],
)
def test_local_source_problems_are_found_at_prepare(tmp_path, source, ref, message):
    (tmp_path / "plain").mkdir()
    raw = [{"name": "u", "type": "code", "source": source, "run": "true", **({"ref": ref} if ref else {})}]
    with pytest.raises(InputError, match=message):
        load_checks(raw, tmp_path)


def test_required_tools_follow_the_checks_and_the_network():
    builtin = {"name": "a", "type": "nonempty", "path": "x"}
    remote = {"name": "r", "type": "code", "source": "https://example.org/c.git", "run": "true"}
    assert set(required_tools(parse_checks([builtin]), network=True)) == {"python3"}
    assert set(required_tools(parse_checks([builtin, remote]), network=True)) == {"python3", "git"}
    # Without network the source is fetched on the host: the image needs no git.
    assert required_tools(parse_checks([remote]), network=False) == {}


RUNBOOK = """---
agent: script
checks:
  - name: good
    type: file_exists
    path: a.md
  - name: bad
    type: json_field
    path: a.json
---
```bash
echo hi > {{results_dir}}/a.md
```
"""


def test_prepare_refuses_bad_checks_before_any_sandbox():
    step = resolve(task_from_runbook(parse(RUNBOOK)))
    inputs = RunInputs(uuid.uuid4().hex, "c", "t")
    with pytest.raises(InputError, match=r"checks\[1\] 'bad': `field` is required"):
        build_plan(step, inputs, get_settings())


def test_run_params_replace_the_runbook_checks():
    step = resolve(
        task_from_runbook(parse(RUNBOOK)), {"checks": [{"name": "x", "type": "nonempty", "path": "a"}]}
    )
    plan = build_plan(step, RunInputs(uuid.uuid4().hex, "c", "t"), get_settings())
    assert [c.name for c in plan.checks] == ["x"] and plan.checks_isolation == "same"


def test_pier_validate_reports_check_errors(tmp_path: Path):
    path = tmp_path / "RUNBOOK.md"
    path.write_text(RUNBOOK)
    report = validate_one(path)
    assert any("'bad': `field` is required" in error.message for error in report.errors)
