"""The overview's charts as inline SVG made on the server: no script, no
library, readable without JavaScript. Each chart has a title and a table of
the same figures next to it for screen readers."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

from markupsafe import Markup

from pier.record import Trajectory
from pier.server.services.stats import task_stats

WIDTH, HEIGHT, PAD = 480, 200, 44
MAX_BAR = 40.0
MAX_DAYS = 60


@dataclass(frozen=True)
class Day:
    day: date
    runs: int
    success_rate: float | None  # of the ended runs
    median_duration: float | None


def by_day(records: Sequence[Trajectory]) -> list[Day]:
    """Per creation day (UTC), oldest first, the last MAX_DAYS days with runs;
    success as the API's task stats count it."""
    groups: dict[date, list[Trajectory]] = defaultdict(list)
    for record in records:
        groups[record.created.date()].append(record)
    days = []
    for day in sorted(groups)[-MAX_DAYS:]:
        runs = groups[day]
        stats = task_stats("", "", runs)
        durations = [r.duration_seconds for r in runs if r.duration_seconds is not None]
        median = statistics.median(durations) if durations else None
        days.append(Day(day, len(runs), stats.success_rate, median))
    return days


def bars(title: str, labels: list[str], values: list[float | None], top: float, unit: str) -> Markup:
    """A bar chart: one bar per label, scaled to `top`; missing values leave a gap."""
    count = max(len(values), 1)
    step = (WIDTH - 2 * PAD) / count
    width = min(max(step * 0.7, 1.0), MAX_BAR)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#555"/>',
        f'<text x="{PAD - 4}" y="{PAD}" text-anchor="end" font-size="14" fill="#333">{_num(top)}{unit}</text>',
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD}" text-anchor="end" font-size="14" fill="#333">0</text>',
    ]
    span = HEIGHT - 2 * PAD
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = PAD + index * step + (step - width) / 2
        if value is not None and top > 0:
            height = max(span * value / top, 1.0)
            parts.append(
                f'<rect x="{x:.1f}" y="{HEIGHT - PAD - height:.1f}" width="{width:.1f}" height="{height:.1f}" '
                f'fill="#1f5fa8"><title>{escape(label)}: {_num(value)}{unit}</title></rect>'
            )
    if labels:
        parts.append(
            f'<text x="{PAD}" y="{HEIGHT - 10}" font-size="14" fill="#333">{escape(labels[0])}</text>'
        )
        parts.append(
            f'<text x="{WIDTH - PAD}" y="{HEIGHT - 10}" text-anchor="end" font-size="14" fill="#333">'
            f"{escape(labels[-1])}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def task_charts(days: list[Day]) -> tuple[Markup, Markup, Markup]:
    """Runs per day, success rate per day (%), median duration per day (s)."""
    labels = [d.day.isoformat() for d in days]
    runs = bars("Runs per day", labels, [float(d.runs) for d in days], max([d.runs for d in days] or [1]), "")
    rates = [None if d.success_rate is None else d.success_rate * 100 for d in days]
    success = bars("Success rate per day", labels, rates, 100, "%")
    spans = [d.median_duration for d in days]
    longest = max([s for s in spans if s is not None] or [1.0])
    durations = bars("Median duration per day", labels, spans, longest, " s")
    return runs, success, durations
