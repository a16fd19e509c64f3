"""The in-sandbox program, run on the host against a folder standing in for /app/results."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pier.checks import program
from pier.checks.runner import program_source


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    root.mkdir()
    (root / "report.md").write_text("# Report\n\nAll good.\nTODO: nothing\n")
    (root / "empty.txt").write_text("")
    (root / "empty-dir").mkdir()
    (root / "out").mkdir()
    (root / "out" / "deep").mkdir()
    (root / "out" / "deep" / "x.csv").write_text("a,b\n")
    (root / "bad.json").write_text("{not json")
    report = {
        "overall_passed": True,
        "score": 0.82,
        "count": 3,
        "stages": [{"name": "setup", "passed": True}, {"name": "report", "passed": False}],
        "flag": 1,
        "label": "gold",
    }
    (root / "v.json").write_text(json.dumps(report))
    (tmp_path / "secret.txt").write_text("the word is hunter2\n")
    (root / "link-out").symlink_to(tmp_path / "secret.txt")
    (root / "link-in").symlink_to(root / "report.md")
    return root


def check(root: Path, **spec) -> tuple[int, str]:
    return program.run(str(root), spec)


@pytest.mark.parametrize(
    ("spec", "code", "says"),
    [
        ({"type": "file_exists", "path": "report.md"}, 0, "report.md exists"),
        ({"type": "file_exists", "path": "missing.md"}, 1, "does not exist"),
        ({"type": "file_exists", "path": "out"}, 1, "is a folder"),
        ({"type": "file_exists", "path": "link-in"}, 0, "exists"),
        ({"type": "nonempty", "path": "report.md"}, 0, "bytes"),
        ({"type": "nonempty", "path": "empty.txt"}, 1, "has 0 bytes"),
        ({"type": "nonempty", "path": "out"}, 0, "holds files"),
        ({"type": "nonempty", "path": "empty-dir"}, 1, "no files"),
        ({"type": "nonempty", "path": "."}, 0, "holds files"),
        ({"type": "json_valid", "path": "v.json"}, 0, "valid JSON (dict)"),
        ({"type": "json_valid", "path": "bad.json"}, 1, "is not valid JSON"),
        ({"type": "json_valid", "path": "missing.json"}, 1, "does not exist"),
        ({"type": "regex", "path": "report.md", "pattern": "^All good"}, 0, "report.md:3"),
        ({"type": "regex", "path": "report.md", "pattern": "^all GOOD", "ignore_case": True}, 0, "found"),
        ({"type": "regex", "path": "report.md", "pattern": "FIXME"}, 1, "not found"),
        ({"type": "regex", "path": "report.md", "pattern": "TODO", "must_match": False}, 1, "report.md:4"),
        ({"type": "regex", "path": "report.md", "pattern": "FIXME", "must_match": False}, 0, "as required"),
        ({"type": "regex", "path": "missing.md", "pattern": "x"}, 1, "does not exist"),
    ],
)
def test_file_checks(results, spec, code, says):
    got, message = check(results, **spec)
    assert got == code, message
    assert says in message


@pytest.mark.parametrize(
    ("spec", "code", "says"),
    [
        ({"field": "overall_passed", "equals": True}, 0, "overall_passed is true"),
        ({"field": "overall_passed", "equals": False}, 1, "is true, expected false"),
        ({"field": "flag", "equals": True}, 1, "expected true"),  # 1 is not true
        ({"field": "count", "equals": 3.0}, 0, "is 3"),
        ({"field": "label", "in": ["gold", "silver"]}, 0, "is 'gold'"),
        ({"field": "label", "in": ["bronze"]}, 1, "expected one of"),
        ({"field": "score", "min": 0.8, "max": 1}, 0, "is 0.82"),
        ({"field": "score", "min": 0.9}, 1, "below the minimum 0.9"),
        ({"field": "score", "max": 0.5}, 1, "above the maximum 0.5"),
        ({"field": "label", "min": 1}, 1, "not a number"),
        ({"field": "overall_passed", "min": 0}, 1, "not a number"),
        ({"field": "stages.1.passed", "equals": False}, 0, "stages.1.passed is false"),
        ({"field": "stages.-1.name", "equals": "report"}, 0, "is 'report'"),
        ({"field": "stages.5.name"}, 1, "is missing (no '5')"),
        ({"field": "nope.deeper"}, 1, "is missing (no 'nope')"),
        ({"field": "stages"}, 0, "is ["),
        ({"field": "overall_passed", "equals": None}, 1, "expected null"),
    ],
)
def test_json_field(results, spec, code, says):
    got, message = check(results, type="json_field", path="v.json", **spec)
    assert got == code, message
    assert says in message


@pytest.mark.parametrize("path", ["link-out", "../secret.txt", "out/../../secret.txt", "/etc/passwd"])
def test_paths_leaving_the_results_are_errors_and_never_read(results, path):
    # The pattern matches the file's line, which a check that read it would quote.
    code, message = check(results, type="regex", path=path, pattern=r"word is hunter\d")
    assert code == 2 and message.startswith("error:"), message
    assert "hunter2" not in message


def test_program_runs_as_the_sandbox_runs_it(results, tmp_path):
    """Standalone, isolated (-I -S), one line out, exit code as the verdict."""
    script = tmp_path / "program.py"
    script.write_bytes(program_source())
    spec = json.dumps({"type": "json_field", "path": "v.json", "field": "score", "min": 0.5})
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(script), str(results), spec], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == "passed: v.json: score is 0.82\n"
    bad = subprocess.run([sys.executable, "-I", "-S", str(script)], capture_output=True, text=True)
    assert bad.returncode == 2


def test_unknown_type_is_an_error(results):
    assert check(results, type="bogus", path="x")[0] == 2


def test_the_program_uses_only_the_standard_library():
    source = program_source().decode()
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"glob", "json", "os", "re", "sys"}


# Exact messages: they are what a runbook author reads when a check fails.


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        ({"type": "file_exists", "path": "report.md"}, 0, "passed: report.md exists (34 bytes)"),
        ({"type": "file_exists", "path": "out"}, 1, "failed: out is a folder, not a file"),
        ({"type": "nonempty", "path": "one.txt"}, 0, "passed: one.txt has 1 bytes"),
        ({"type": "nonempty", "path": "empty-dir"}, 1, "failed: empty-dir is a folder with no files in it"),
        ({"type": "nonempty", "path": "missing"}, 1, "failed: missing does not exist"),
        ({"type": "json_valid", "path": "bom.json"}, 0, "passed: bom.json is valid JSON (dict)"),
        ({"type": "regex", "path": "report.md", "pattern": "^All"}, 0,
         "passed: report.md:3: pattern '^All' found ('All')"),
        ({"type": "regex", "path": "report.md", "pattern": "^# Report"}, 0,
         "passed: report.md:1: pattern '^# Report' found ('# Report')"),
        ({"type": "regex", "path": "report.md", "pattern": "^all good"}, 1,
         "failed: report.md: pattern '^all good' not found"),
        ({"type": "regex", "path": "report.md", "pattern": "FIXME", "must_match": False}, 0,
         "passed: report.md: pattern 'FIXME' not found, as required"),
        ({"type": "regex", "path": "report.md", "pattern": "TODO", "must_match": False}, 1,
         "failed: report.md:4: pattern 'TODO' found ('TODO') but must not be"),
        ({"type": "regex", "path": "latin1.txt", "pattern": "caf.!"}, 0,
         "passed: latin1.txt:1: pattern 'caf.!' found ('caf\ufffd!')"),
        ({"type": "regex", "path": "report.md", "pattern": "(?<=x+)y"}, 2,
         "error: pattern '(?<=x+)y' is not valid here: look-behind requires fixed-width pattern"),
        ({"type": "json_field", "path": "bom.json", "field": "a"}, 0, "passed: bom.json: a is 1"),
        ({"type": "json_field", "path": "bad.json", "field": "a"}, 1,
         "failed: bad.json is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ({"type": "bogus", "path": "x"}, 2, "error: unknown check type 'bogus'"),
        ({"type": "file_exists", "path": "/etc/passwd"}, 2,
         "error: path '/etc/passwd' must be relative to the results folder"),
        ({"type": "file_exists", "path": "../secret.txt"}, 2,
         "error: path '../secret.txt' leaves the results folder; it was not read"),
    ],
)  # fmt: skip
def test_messages(results, spec, code, message):
    (results / "one.txt").write_text("x")
    (results / "bom.json").write_bytes(b'\xef\xbb\xbf{"a": 1}')
    (results / "latin1.txt").write_bytes(b"caf\xe9!\n")
    assert program.run(str(results), spec) == (code, message)


@pytest.mark.parametrize(
    ("value", "spec", "problem"),
    [
        ([1, [2, {"k": True}]], {"equals": [1.0, [2, {"k": True}]]}, None),
        ([1, 2], {"equals": [1, 2, 3]}, "is [1, 2], expected [1, 2, 3]"),
        ([1, 2, 3], {"equals": [1, 2]}, "is [1, 2, 3], expected [1, 2]"),
        ([1, 2], {"equals": [1, 3]}, "is [1, 2], expected [1, 3]"),
        ([1], {"equals": 1}, "is [1], expected 1"),
        ({"a": 1}, {"equals": {"a": 1, "b": 2}}, 'is {"a": 1}, expected {"a": 1, "b": 2}'),
        ({"a": 1}, {"equals": {"a": 2}}, 'is {"a": 1}, expected {"a": 2}'),
        ({"a": 1}, {"equals": "a"}, "is {\"a\": 1}, expected 'a'"),
        ("1", {"equals": 1}, "is '1', expected 1"),
        (1, {"equals": "1"}, "is 1, expected '1'"),
        ("gold", {"in": ["bronze", "silver"]}, 'is \'gold\', expected one of ["bronze", "silver"]'),
        ("x", {"max": 3}, "is 'x', not a number"),
        (0.5, {"min": 0.5, "max": 0.5}, None),
        (0.4, {"min": 0.5}, "is 0.4, below the minimum 0.5"),
        (0.6, {"max": 0.5}, "is 0.6, above the maximum 0.5"),
        ("x" * 300, {"equals": "y"}, f"is {repr('x' * 300)[:200]}..., expected 'y'"),
        ("x" * 198, {"equals": "y"}, f"is {'x' * 198!r}, expected 'y'"),
    ],
)
def test_json_field_conditions(value, spec, problem):
    assert program.field_problem(value, spec) == problem


def test_field_paths_index_lists_within_bounds():
    document = {"a": [10, 20, 30], "b": {"c": None}}
    assert program.field_value(document, "a.-3") == 10 and program.field_value(document, "a.2") == 30
    for missing in ("a.3", "a.-4", "a.x", "b.c.d", "z"):
        with pytest.raises(KeyError):
            program.field_value(document, missing)
    with pytest.raises(KeyError):
        program.field_value(["x"], "0.0")  # a string is not indexed


def test_an_unreadable_file_is_an_error_naming_it(results, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(program, "open", refuse, raising=False)
    assert program.run(str(results), {"type": "regex", "path": "report.md", "pattern": "x"}) == (
        2,
        "error: cannot read report.md: Permission denied",
    )


def test_main_prints_one_line_and_returns_the_verdict(results, capsys):
    spec = json.dumps({"type": "file_exists", "path": "missing.md"})
    assert program.main(["program.py", str(results), spec]) == 1
    assert capsys.readouterr().out == "failed: missing.md does not exist\n"
    there = json.dumps({"type": "file_exists", "path": "report.md"})
    assert program.main(["program.py", str(results), there]) == 0
    assert capsys.readouterr().out == "passed: report.md exists (34 bytes)\n"
    assert program.main(["program.py", str(results)]) == 2
    assert program.main(["program.py", str(results), spec, "extra"]) == 2
    assert capsys.readouterr().out == "usage: program.py RESULTS_DIR SPEC_JSON\n" * 2


def test_a_match_on_the_second_line_after_an_empty_first_line(results):
    (results / "gap.txt").write_text("\nfound\n")
    spec = {"type": "regex", "path": "gap.txt", "pattern": "found"}
    assert program.run(str(results), spec) == (0, "passed: gap.txt:2: pattern 'found' found ('found')")
