"""The Grafana dashboard in ops/grafana reads only series pier exports: a
renamed metric breaks this test, not an operator's graphs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pier.telemetry import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "ops" / "grafana" / "pier-dashboard.json"
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def exported() -> set[str]:
    names = set()
    for family in metrics.REGISTRY.collect():
        names.add(family.name)
        names.update(f"{family.name}{suffix}" for suffix in SUFFIXES)
    return names


def test_every_expression_reads_a_series_pier_exports():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 14
    known = exported()
    for expr in exprs:
        used = set(re.findall(r"\bpier_[a-z_]+", expr))
        assert used, expr
        assert used <= known, (expr, used - known)


def test_the_dashboard_covers_what_operators_ask_first():
    text = DASHBOARD.read_text()
    for name in ("pier_runs_ended_total", "pier_run_queue_wait_seconds", "pier_stage_duration_seconds",
                 "pier_sandboxes_live", "pier_warm_pool_size", "pier_gateway_tokens_total",
                 "pier_gateway_cost_usd_total"):  # fmt: skip
        assert name in text, name
