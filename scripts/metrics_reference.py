"""Write the metrics reference into docs/observability.md (between its markers)
from the metrics themselves (pier.telemetry.metrics): each series pier exports,
its type, labels and help text, in the order the module defines them. A unit
test fails when the page and the code disagree: run this after changing a metric.

    uv run python scripts/metrics_reference.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from pier.telemetry import metrics

PAGE = Path(__file__).resolve().parents[1] / "docs" / "observability.md"
START, END = (
    "<!-- metrics:start (scripts/metrics_reference.py writes this part) -->",
    "<!-- metrics:end -->",
)


def rows() -> list[tuple[str, str, str, str]]:
    """(series, type, labels, help) of every metric the module defines."""
    found = []
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            kind = value._type  # counter, gauge, histogram
            name = value._name + ("_total" if kind == "counter" else "")
            found.append((name, kind, ", ".join(value._labelnames), value._documentation))
    metrics.watch_readiness(lambda: {})  # pier_ready is exported once a server probes
    try:
        for family in metrics.REGISTRY.collect():
            if family.name == "pier_ready":
                found.append((family.name, family.type, ", ".join(family._labelnames), family.documentation))
    finally:
        metrics.watch_readiness(None)
    return found


def reference() -> str:
    lines = ["| series | type | labels | what |", "| --- | --- | --- | --- |"]
    lines += [f"| `{name}` | {kind} | {labels} | {text} |" for name, kind, labels, text in rows()]
    return "\n".join(lines)


def rewritten(page: str) -> str:
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference()}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    args = parser.parse_args()
    page = PAGE.read_text()
    new = rewritten(page)
    if args.check:
        if new != page:
            print(f"{PAGE} is out of date: run scripts/metrics_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
