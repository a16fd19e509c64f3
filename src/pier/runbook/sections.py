"""The runbook body's structure: its fenced blocks, each with the `##` section
and `###` heading it sits under, and the platform's `## Code Checks` section read
as one check per `### <id> — <name>` heading (docs/runbook-format.md).

Lines are 1-based in the text given (the body); a caller adds the frontmatter's
lines to place them in the file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_HEADING = re.compile(r"^[ ]{0,3}(?P<hashes>#{1,6})[ \t]+(?P<text>.*?)[ \t#]*$")
CODE_CHECKS = "code checks"
# `### <id> — <name>`: an em dash, an en dash or a spaced hyphen between them.
_CHECK_HEADING = re.compile(r"^(?P<id>\S+?)\s+(?:\u2014|\u2013|--|-)\s+(?P<name>.+)$")
CHECK_ID = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Fence:
    lang: str  # the info string's first word, lower-cased ("" when none)
    attrs: dict[str, str]  # key=value words after it (`bash executor=agent`)
    body: str
    line: int  # of the opening fence
    column: int
    section: str = ""  # the `##` heading it is under
    heading: str = ""  # the `###` heading it is under, inside that section
    closed: bool = True


@dataclass(frozen=True)
class CheckHeading:
    """One `###` heading of `## Code Checks` and the fences under it."""

    text: str
    line: int
    column: int
    id: str | None
    name: str
    fences: tuple[Fence, ...] = field(default=())


def fences(markdown: str) -> list[Fence]:
    """Every fenced block, in order, with the headings it is under."""
    found: list[Fence] = []
    lines = markdown.splitlines()
    section = heading = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        match = _FENCE_OPEN.match(line)
        if match is None:
            title = _HEADING.match(line)
            if title is not None and len(title.group("hashes")) <= 2:
                section, heading = title.group("text").strip(), ""
            elif title is not None and len(title.group("hashes")) == 3:
                heading = title.group("text").strip()
            index += 1
            continue
        words = match.group("info").split()
        lang = words[0].lower() if words else ""
        attrs = dict(word.split("=", 1) for word in words[1:] if "=" in word)
        body, end, closed = _read_block(lines, index + 1, match.group("fence"))
        column = len(match.group("indent")) + 1
        found.append(Fence(lang, attrs, body, index + 1, column, section, heading, closed))
        index = end
    return found


def _read_block(lines: list[str], start: int, fence: str) -> tuple[str, int, bool]:
    closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            return "\n".join(lines[start:index]), index + 1, True
    return "\n".join(lines[start:]), len(lines), False


def is_code_checks(section: str) -> bool:
    return section.strip().lower() == CODE_CHECKS


def is_report_section(section: str) -> bool:
    """The section that tells the agent how to write validation_report.json."""
    lowered = section.lower()
    return "validation report" in lowered or "validation_report" in lowered


def code_checks(markdown: str) -> list[CheckHeading]:
    """The `## Code Checks` section's checks, one per `###` heading, in order.
    A heading whose text is not `<id> — <name>` has id None."""
    lines = markdown.splitlines()
    in_fence: set[int] = set()
    for block in fences(markdown):
        end = block.line + block.body.count("\n") + (1 if block.body else 0) + (1 if block.closed else 0)
        in_fence.update(range(block.line, end + 1))
    headings: list[CheckHeading] = []
    inside = False
    for number, line in enumerate(lines, 1):
        if number in in_fence:
            continue
        title = _HEADING.match(line)
        if title is None:
            continue
        level, text = len(title.group("hashes")), title.group("text").strip()
        if level <= 2:
            inside = is_code_checks(text)
        elif level == 3 and inside:
            named = _CHECK_HEADING.match(text)
            column = line.index("#") + 1
            check_id = named.group("id") if named else None
            name = named.group("name").strip() if named else text
            headings.append(CheckHeading(text, number, column, check_id, name))
    blocks = [b for b in fences(markdown) if is_code_checks(b.section)]
    return [
        CheckHeading(h.text, h.line, h.column, h.id, h.name, tuple(_under(h, headings, blocks)))
        for h in headings
    ]


def _under(heading: CheckHeading, headings: list[CheckHeading], blocks: list[Fence]) -> list[Fence]:
    following = [h.line for h in headings if h.line > heading.line]
    end = following[0] if following else 1 << 30
    return [b for b in blocks if heading.line < b.line < end]
