"""The alert rules in ops/prometheus: promtool checks them and runs their
tests (each alert fires on the series that should raise it and not on a
healthy fleet's), they read only series pier exports, and each has its
runbook line in docs/observability.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from pier.telemetry import metrics
from tests.support.services import executable

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "pier-alerts.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "pier-alerts.test.yml"
DOC = ROOT / "docs" / "observability.md"
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def promtool() -> str:
    return executable(
        "promtool", "promtool", "install Prometheus's tools (Debian: apt-get install prometheus)"
    )


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules():
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_runs_the_rules_tests():
    done = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=RULE_TESTS.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested():
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in rules()} <= tested


def test_the_conditions_the_operator_asked_for_have_an_alert():
    exprs = " ".join(rule["expr"] for rule in rules())
    for series in ("pier_runs_ended_total", "pier_run_queue_length", "pier_sandboxes_swept_total",
                   'pier_gateway_requests_total{status=~"5.."}', 'outcome="gave_up"', 'up{job="pier-worker"}',
                   "pier_ready"):  # fmt: skip
        assert series in exprs, series


def test_rules_read_only_series_pier_exports():
    metrics.watch_readiness(lambda: {"database": True})
    try:
        known = {"up"}
        for family in metrics.REGISTRY.collect():
            known.add(family.name)
            known.update(f"{family.name}{suffix}" for suffix in SUFFIXES)
    finally:
        metrics.watch_readiness(None)
    for rule in rules():
        used = set(re.findall(r"\b(pier_[a-z_]+|up)\b", rule["expr"]))
        assert used and used <= known, (rule["alert"], used - known)


def test_each_alert_has_its_runbook_line():
    text = DOC.read_text()
    for rule in rules():
        name = rule["alert"]
        assert rule["annotations"]["runbook"] == f"docs/observability.md#{name.lower()}"
        section = re.search(rf"^### {name}\n\n(.+?)(?=^#)", text, re.S | re.M)
        assert section, f"docs/observability.md has no '### {name}'"
        assert len(section.group(1).split()) >= 20, name
