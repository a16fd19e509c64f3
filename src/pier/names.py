"""The rules for the names a caller gives (collections, tasks, trajectory ids),
in one place below every package that checks them: the API, the CLI, the
routines and the files on disk refuse the same names the same way."""

from __future__ import annotations

import re

from pier.errors import InputError

_FORBIDDEN = ("/", "\\", "\x00")


def check_name(kind: str, name: str) -> str:
    """`name` when it is one safe path component, else InputError. A leading dot
    is refused too: it keeps '.', '..' and pier's own folders (.uploads) apart."""
    if not name or name.startswith(".") or any(c in name for c in _FORBIDDEN):
        raise InputError(
            f"invalid {kind} name {name!r}: use a non-empty name without '/', '\\' or a leading '.'"
        )
    return name


# The one rule for collection names, the API's and the CLI's (a name `pier run`
# accepted and the API then refused would strand that collection's runs).
COLLECTION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
COLLECTION_NAME_RULE = "letters, digits, '-', '_' and '.', starting with a letter or digit, at most 128"
_COLLECTION_NAME = re.compile(COLLECTION_NAME_PATTERN)


def check_collection_name(name: str) -> str:
    """`name` when it is a valid collection name, else InputError saying the rule."""
    if not _COLLECTION_NAME.fullmatch(name):
        raise InputError(f"invalid collection name {name!r}: use {COLLECTION_NAME_RULE}")
    return name


def workflow_id(collection: str, task: str, trajectory_id: str) -> str:
    """The platform's id of a run, derived here and nowhere else: its trajectory id
    is pier's own (a run's folder, its log, its sandbox's `pier.run` label)."""
    return f"{collection}-{task}--{trajectory_id}"


def trajectory_id_of(workflow_id: str) -> str:
    """The trajectory id a workflow id ends with; a bare trajectory id is its own."""
    return workflow_id.rsplit("--", 1)[-1]


MAX_TASK_NAME = 128
MAX_NAME_BYTES = 255


def check_task_name(name: str) -> str:
    """`name` when it can name a stored task, else InputError saying why."""
    if len(name) > MAX_TASK_NAME:
        raise InputError(f"task name is {len(name)} characters long: use at most {MAX_TASK_NAME}")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:  # it names a folder: a file system takes no longer name
        raise InputError(f"task name is {size} bytes long in UTF-8: use at most {MAX_NAME_BYTES}")
    return check_name("task", name)


# A file name a run made is data: any bytes but '/' and NUL (docs/storage.md,
# "Names of files a run made"). Where pier collects a run's files it names each
# path component by this rule, so what it stores, lists, serves and shows is
# always printable UTF-8, and the bytes are recovered by percent-decoding.
NAME_MAX_BYTES = 255
_CUT_MARK_HEX = 8


def file_name(raw: bytes) -> str:
    """One path component of a file a run made, as pier names it: printable
    UTF-8 characters are kept, except '%'; every other byte (invalid UTF-8, a
    control character, a newline, a non-printable code point, '%') is written
    %XX. A name that comes out longer than 255 bytes is cut to fit and ends with
    '~' and 8 hex digits of the raw name's SHA-256."""
    parts: list[str] = []
    text = raw.decode("utf-8", errors="surrogateescape")
    for ch in text:
        if ch.isprintable() and ch != "%":
            parts.append(ch)
        else:
            data = ch.encode("utf-8", errors="surrogateescape")
            parts.append("".join(f"%{b:02X}" for b in data))
    name = "".join(parts)
    if len(name.encode()) <= NAME_MAX_BYTES:
        return name
    import hashlib

    mark = "~" + hashlib.sha256(raw).hexdigest()[:_CUT_MARK_HEX]
    room, kept = NAME_MAX_BYTES - len(mark), []
    for part in parts:  # never splits a character or a %XX
        room -= len(part.encode())
        if room < 0:
            break
        kept.append(part)
    return "".join(kept) + mark


def file_path(name: str) -> str:
    """A relative path as tarfile reads it (str, undecodable bytes as
    surrogates), each component named by file_name."""
    import os

    return "/".join(file_name(os.fsencode(part)) for part in name.split("/"))
