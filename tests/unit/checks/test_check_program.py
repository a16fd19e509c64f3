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
    assert imports <= {"json", "os", "re", "sys"}
