"""pier's built-in checks, as one program that pier copies into the sandbox and runs
with the sandbox's own python3 (`python3 -I -S program.py RESULTS_DIR SPEC_JSON`).

It runs on whatever python3 an image has, so it uses only the standard library
and nothing newer than Python 3.6. It prints one line saying what it found and
exits 0 when the check passed, 1 when it failed, 2 when it could not be
evaluated (such as a path that leaves the results folder, which is never read).
"""

import glob as globbing
import json
import os
import re
import sys

PASSED, FAILED, ERROR = 0, 1, 2
SHOWN_CHARS = 200  # of a value or a matched line, in the message


class CheckError(Exception):
    """The check cannot be evaluated: an error, not a failure."""


def locate(root, path):
    """The real path of `path` under root. Symbolic links are followed first, so a
    link that points out of the results folder is refused like `..` is."""
    real_root = os.path.realpath(root)
    if os.path.isabs(path):
        raise CheckError(f"path {path!r} must be relative to the results folder")
    target = os.path.realpath(os.path.join(real_root, path))
    if target != real_root and not target.startswith(real_root.rstrip(os.sep) + os.sep):
        raise CheckError(f"path {path!r} leaves the results folder; it was not read")
    return target


def shown(value):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def check_file_exists(target, spec):
    path = spec["path"]
    if os.path.isfile(target):
        return True, f"{path} exists ({os.path.getsize(target)} bytes)"
    if os.path.isdir(target):
        return False, f"{path} is a folder, not a file"
    return False, f"{path} does not exist"


def check_nonempty(target, spec):
    path = spec["path"]
    if os.path.isfile(target):
        size = os.path.getsize(target)
        return size > 0, f"{path} has {size} bytes"
    if os.path.isdir(target):
        for _dirpath, _dirs, files in os.walk(target):
            if files:
                return True, f"{path} holds files"
        return False, f"{path} is a folder with no files in it"
    return False, f"{path} does not exist"


def load_json(target, spec):
    """(value, None) or (None, why it is not JSON)."""
    if not os.path.isfile(target):
        return None, f"{spec['path']} does not exist"
    try:
        with open(target, encoding="utf-8-sig") as handle:
            return json.load(handle), None
    except ValueError as exc:
        return None, f"{spec['path']} is not valid JSON: {exc}"


def check_json_valid(target, spec):
    value, problem = load_json(target, spec)
    if problem:
        return False, problem
    return True, f"{spec['path']} is valid JSON ({type(value).__name__})"


def field_value(document, dotted):
    """The value at a dotted path; a part that is a number indexes a list.
    Raises KeyError naming the part that is missing."""
    value = document
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and re.match(r"^-?\d+$", part) and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(part)
    return value


def same(a, b):
    """JSON equality: true is not 1, 1 is 1.0, containers compare item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # noqa: B905 (3.6+)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def field_problem(value, spec):
    """Why value does not meet the spec's conditions, or None."""
    if "equals" in spec and not same(value, spec["equals"]):
        return f"is {shown(value)}, expected {shown(spec['equals'])}"
    if "in" in spec and spec["in"] is not None and not any(same(value, o) for o in spec["in"]):
        return f"is {shown(value)}, expected one of {shown(spec['in'])}"
    bounded = spec.get("min") is not None or spec.get("max") is not None
    if bounded and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"is {shown(value)}, not a number"
    if spec.get("min") is not None and value < spec["min"]:
        return f"is {shown(value)}, below the minimum {shown(spec['min'])}"
    if spec.get("max") is not None and value > spec["max"]:
        return f"is {shown(value)}, above the maximum {shown(spec['max'])}"
    return None


def check_json_field(target, spec):
    document, problem = load_json(target, spec)
    if problem:
        return False, problem
    where = f"{spec['path']}: {spec['field']}"
    try:
        value = field_value(document, spec["field"])
    except KeyError as exc:
        return False, f"{where} is missing (no {exc.args[0]!r})"
    problem = field_problem(value, spec)
    if problem:
        return False, f"{where} {problem}"
    return True, f"{where} is {shown(value)}"


def check_regex(target, spec):
    if not os.path.isfile(target):
        return False, f"{spec['path']} does not exist"
    flags = re.MULTILINE | (re.IGNORECASE if spec.get("ignore_case") else 0)
    with open(target, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    try:
        match = re.search(spec["pattern"], text, flags)
    except re.error as exc:
        raise CheckError(f"pattern {spec['pattern']!r} is not valid here: {exc}") from None
    must_match = spec.get("must_match", True)
    if match is None:
        verb = "not found" if must_match else "not found, as required"
        return not must_match, f"{spec['path']}: pattern {shown(spec['pattern'])} {verb}"
    line = text.count("\n", 0, match.start()) + 1
    found = f"{spec['path']}:{line}: pattern {shown(spec['pattern'])} found ({shown(match.group(0))})"
    return must_match, found if must_match else found + " but must not be"


def check_min_size(target, spec):
    path, least = spec["path"], spec.get("min_bytes", 1)
    if not os.path.isfile(target):
        return False, f"{path} does not exist"
    size = os.path.getsize(target)
    if size < least:
        return False, f"{path} has {size} bytes, fewer than {least}"
    return True, f"{path} has {size} bytes (at least {least})"


def check_regex_present(target, spec):
    absent = spec["type"] == "regex_absent"
    return check_regex(target, dict(spec, must_match=not absent))


# [text](target) and ![alt](target), not inside `code`; a target may be <bracketed>.
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\)")
FENCED = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)


def relative_links(text):
    """The relative targets of a Markdown text's links (no scheme, no #anchor only)."""
    text = FENCED.sub("", text)
    for match in MARKDOWN_LINK.finditer(re.sub(r"`[^`\n]*`", "", text)):
        target = match.group(1).strip("<>")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith(("#", "//")):
            continue
        target = target.split("#", 1)[0].split("?", 1)[0]
        if target:
            yield target


def check_markdown_links(target, spec):
    path = spec["path"]
    if not os.path.isfile(target):
        return False, f"{path} does not exist"
    with open(target, encoding="utf-8", errors="replace") as handle:
        links = list(relative_links(handle.read()))
    base = os.path.dirname(target)
    broken = [link for link in links if not os.path.exists(os.path.join(base, link))]
    if broken:
        return (
            False,
            f"{path}: {len(broken)} of {len(links)} relative link(s) do not resolve: {shown(broken)}",
        )
    return True, f"{path}: {len(links)} relative link(s) resolve"


CHECKS = {
    "file_exists": check_file_exists,
    "nonempty": check_nonempty,
    "json_valid": check_json_valid,
    "json_field": check_json_field,
    "regex": check_regex,
    "min_size": check_min_size,
    "regex_present": check_regex_present,
    "regex_absent": check_regex_present,
    "markdown_relative_links_resolve": check_markdown_links,
}


def targets(root, spec):
    """The relative paths the check reads: its `path`, or what its `glob` matches
    (files only, sorted). Raises CheckError for a glob that leaves the folder."""
    if spec.get("path") is not None:
        return [spec["path"]]
    pattern = spec["glob"]
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise CheckError(f"glob {pattern!r} must stay inside the results folder")
    real_root = os.path.realpath(root)
    found = globbing.glob(os.path.join(real_root, pattern), recursive=True)
    return sorted(os.path.relpath(f, real_root) for f in found if os.path.isfile(f))


def run(root, spec):
    """(exit code, message) for one check."""
    check = CHECKS.get(spec.get("type"))
    if check is None:
        return ERROR, f"error: unknown check type {spec.get('type')!r}"
    try:
        paths = targets(root, spec)
        if not paths:
            return FAILED, f"failed: no file in the results folder matches {spec['glob']!r}"
        messages, passed = [], True
        for path in paths:
            ok, message = check(locate(root, path), dict(spec, path=path))
            passed = passed and ok
            messages.append(message)
    except CheckError as exc:
        return ERROR, f"error: {exc}"
    except OSError as exc:
        return ERROR, f"error: cannot read {spec.get('path') or spec.get('glob')}: {exc.strerror or exc}"
    return (PASSED if passed else FAILED), ("passed: " if passed else "failed: ") + "; ".join(messages)


def main(argv):
    if len(argv) != 3:
        print("usage: program.py RESULTS_DIR SPEC_JSON")
        return ERROR
    code, message = run(argv[1], json.loads(argv[2]))
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
