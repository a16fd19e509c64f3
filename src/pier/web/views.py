"""What pages show, derived from the run model: rendered Markdown, the agent's
transcript, file previews, durations. Presentation only; the rules stay in the
API and the lifecycle."""

from __future__ import annotations

import csv
import io
import json
import posixpath
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markupsafe import Markup

from pier.agents import get_agent
from pier.errors import InputError, RunbookError
from pier.record import ResultFile, Trajectory
from pier.runbook.parse import split
from pier.storage.base import RunStorage

PREVIEW_BYTES = 256 * 1024  # a preview shows at most this much of a file
TRANSCRIPT_BYTES = 4 * 1024 * 1024
TRANSCRIPT_ENTRIES = 3000
CSV_ROWS = 200
TEXT_TYPES = ("text/", "application/json", "application/x-yaml", "application/yaml", "application/xml")
TEXT_EXTENSIONS = frozenset({"txt", "log", "py", "sh", "yaml", "yml", "toml", "ini", "cfg", "xml", "html",
                             "js", "ts", "css", "sql", "diff", "patch", "jsonl"})  # fmt: skip

# HTML in agent output is shown as text, never rendered: html=False escapes it.
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


def markdown(text: str, base: str | None = None) -> Markup:
    """Markdown as HTML, HTML in it escaped (html=False). With `base` (a URL
    folder), an image named by a relative path is fetched from there: a
    report's own charts show; images from elsewhere stay blocked by the pages'
    policy."""
    env: dict[str, Any] = {}
    tokens = _markdown.parse(text, env)
    if base:
        for token in tokens:
            for child in token.children or []:
                src = child.attrGet("src") if child.type == "image" else None
                if isinstance(src, str) and _relative(src):
                    child.attrSet("src", base + src)
    return Markup(_markdown.renderer.render(tokens, _markdown.options, env))


def _relative(url: str) -> bool:
    parts = urlsplit(url)
    return not (parts.scheme or parts.netloc or url.startswith(("/", "#")))


def money(usd: float | None) -> str:
    """A cost as every page shows it: "—" when none is known."""
    return "—" if usd is None else f"${usd:.4f}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"


def ordered_files(record: Trajectory) -> list[ResultFile]:
    """The run's result files, its primary outputs first (in their order)."""
    files = record.outputs.results_files
    primary = record.outputs.primary_files
    rank = {path: index for index, path in enumerate(primary)}
    return sorted(files, key=lambda f: (rank.get(f.path, len(rank)), f.path))


@dataclass(frozen=True)
class Preview:
    kind: str  # markdown | image | json | csv | text | none
    html: Markup | None = None
    text: str = ""
    rows: list[list[str]] | None = None
    truncated: bool = False


def preview(storage: RunStorage, collection: str, file: ResultFile) -> Preview:
    """How a result file shows inline: Markdown rendered, images as images,
    JSON pretty-printed, CSV as a table, other text as text; at most
    PREVIEW_BYTES of it."""
    ext = file.extension.lower().lstrip(".")
    if file.content_type.startswith("image/") and ext != "svg":
        return Preview("image")
    if not (file.content_type.startswith(TEXT_TYPES) or ext in TEXT_EXTENSIONS or ext in ("md", "csv")):
        return Preview("none")
    if not file.key or not file.key.startswith(f"{collection}/"):
        return Preview("none")
    try:
        data, truncated = _head(storage, file.key)
    except (InputError, OSError):  # NotFoundError is an InputError
        return Preview("none")
    text = data.decode(errors="replace")
    if ext in ("md", "markdown"):
        base = f"/api/v1/file/{posixpath.dirname(file.key)}/" if file.key else None
        return Preview("markdown", html=markdown(text, base), truncated=truncated)
    if ext == "json" and not truncated:
        try:
            return Preview("json", text=json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            return Preview("text", text=text)
    if ext == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        return Preview("csv", rows=rows[:CSV_ROWS], truncated=truncated or len(rows) > CSV_ROWS)
    return Preview("text", text=text, truncated=truncated)


def _head(storage: RunStorage, key: str, limit: int = PREVIEW_BYTES) -> tuple[bytes, bool]:
    """The first `limit` bytes of a stored file, and whether there is more."""
    with storage.open(key) as handle:
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit


@dataclass(frozen=True)
class Entry:
    kind: str  # message | call | result | command | error
    text: str


def transcript(storage: RunStorage, record: Trajectory) -> list[Entry]:
    """The agent's saved stream (/logs/agent), each line as its CLI adapter's
    readable() shows it in the run log, sorted into kinds for display."""
    logs = [f.key for f in storage.files(f"{record.storage_path}/logs") if f.key.count("/") == 4]
    streams = [k for k in logs if k.endswith(".jsonl")] or [k for k in logs if k.endswith(".log")]
    try:
        agent = get_agent(record.outputs.agent or record.run.inputs.get("agent"))
    except InputError:
        agent = None
    entries: list[Entry] = []
    for stream in streams:
        data, _ = _head(storage, stream, TRANSCRIPT_BYTES)
        for line in data.decode(errors="replace").splitlines():
            shown = agent.readable(line) if agent else line
            if shown and shown.strip():
                entries.append(Entry(_kind(shown), shown))
            if len(entries) >= TRANSCRIPT_ENTRIES:
                return entries
    return entries


def _kind(text: str) -> str:
    if text.startswith(("error:", "warning:")):
        return "error"
    if text.startswith(("tool result:", "exit ")):
        return "result"
    if text.startswith("tool "):
        return "call"
    if text.startswith("$ "):
        return "command"
    return "message"


@dataclass(frozen=True)
class RunbookView:
    frontmatter: str | None
    body: Markup


def runbook_view(text: str) -> RunbookView:
    """A runbook as people read it: its frontmatter as text, its body rendered."""
    try:
        frontmatter, body, _ = split(text)
    except RunbookError:
        frontmatter, body = None, text
    return RunbookView(frontmatter, markdown(body))


def shown_inputs(record: Trajectory) -> dict[str, Any]:
    """The resolved parameters as stored (secrets were masked before storing),
    without the runbook text, which shows on its own."""
    return {k: v for k, v in record.run.inputs.items() if k != "instruction"}


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class UsageRow:
    source: str  # who counted: the agent's own report, or pier's model gateway
    provider: str
    model: str
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    calls: int | None


USAGE_KEYS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
    "api_calls",
    "requests",
    "gateway",
)


def usage_rows(record: Trajectory) -> tuple[list[UsageRow], dict[str, Any]]:
    """A run's usage as a table, one row per provider and model and per who
    counted it (the agent's CLI, pier's gateway: kept beside each other, never
    summed), and the rest of what was reported, by name."""
    usage = record.outputs.usage or {}
    inputs = record.run.inputs
    provider = str(inputs.get("model_provider") or usage.get("provider") or "—")
    model = str(record.outputs.model or inputs.get("model") or usage.get("model") or "—")
    rows = []
    if any(usage.get(k) is not None for k in ("prompt_tokens", "completion_tokens", "cost_usd")):
        rows.append(_usage_row("agent's report", provider, model, usage))
    seen = usage.get("gateway")
    if isinstance(seen, dict) and seen:
        rows.append(_usage_row("pier's gateway", provider, model, seen))
    rest = {k: v for k, v in usage.items() if k not in USAGE_KEYS}
    return rows, rest


def _usage_row(source: str, provider: str, model: str, data: dict[str, Any]) -> UsageRow:
    def number(key: str) -> Any:
        value = data.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    return UsageRow(source, provider, model, number("prompt_tokens"), number("completion_tokens"),
                    number("cost_usd"), number("api_calls"))  # fmt: skip
