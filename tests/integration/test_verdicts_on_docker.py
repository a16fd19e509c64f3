"""Verdicts on a real engine, through the `pier` command: an experiment whose
bad input makes the agent write nothing counts those attempts as the agent's
failures (never pier's), and a run that fails in set up ends there, its log,
record and summary naming that failure only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.test_checks import derived_image

pytestmark = pytest.mark.integration

GOOD_BAD = """---
agent: script
snapshot: ""
image: {image}
---
# good or bad

```bash
if [ "{{{{kind}}}}" = good ]; then echo ok > {{{{results_dir}}}}/out.txt; fi
```
"""


def pier(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def experiment(*args: str) -> subprocess.CompletedProcess[str]:
    return pier("experiment", *args)


def test_an_agent_that_writes_nothing_fails_its_attempts_and_is_not_infrastructure(
    base_image, tmp_path: Path
):
    """On main: the bad cell read `ended 0, infra 9` (each attempt retried twice
    as pier's failure at stage collect) and the experiment 100 %."""
    (tmp_path / "RUNBOOK.md").write_text(GOOD_BAD.format(image=base_image))
    (tmp_path / "experiment.yaml").write_text(
        "name: goodbad\nrunbook: RUNBOOK.md\nmatrix:\n  vars: [{kind: good}, {kind: bad}]\n"
        "attempts: 3\nconcurrency: 3\ninfra_retries: 2\n"
    )
    assert pier("collection", "create", "goodbad").returncode == 0
    ran = experiment("run", str(tmp_path / "experiment.yaml"), "--collection", "goodbad")  # worked here
    assert ran.returncode == 0, ran.stderr
    (found,) = [e for e in json.loads(experiment("list", "--json").stdout) if e["name"] == "goodbad"]
    results = json.loads(experiment("show", found["id"], "--json").stdout)["results"]
    total = results["total"]
    assert (total["attempts"], total["successes"], total["pass_rate"]) == (6, 3, 0.5), total
    assert (total["infra_failures"], total["infra_lost"]) == (0, 0), total
    bad = next(c for c in results["cells"] if c.get("row_label") == "kind=bad")
    assert (bad["attempts"], bad["successes"], bad["infra_failures"]) == (3, 0, 0), bad
    assert bad["outcomes"] == {"no_results": 3}
    (failure,) = bad["failures"]
    assert failure["outcome"] == "no_results" and failure["stage"] == "collect" and failure["count"] == 3
    assert "nothing in /app/results" in failure["message"]
    assert results["runs_started"] == 6  # nothing was retried


def test_a_set_up_failure_is_the_only_failure_the_run_names(docker_backend, base_image, tmp_path: Path):
    """An image without python3 and a check that needs it: set up refuses before
    the agent starts. On main the log went on to 'collect failed: the agent
    finished with nothing in /app/results'."""
    image = derived_image(
        docker_backend, base_image, "no-python", "RUN rm -f /usr/bin/python3 /usr/bin/python3.*"
    )
    runbook = tmp_path / "RUNBOOK.md"
    runbook.write_text(
        '---\nagent: script\nsnapshot: ""\nchecks: [{name: report, type: file_exists, path: a.md}]\n---\n'
        "# r\n\n```bash\necho ran > {{results_dir}}/a.md\n```\n"
    )
    ran = pier("run", str(runbook), "--image", image)
    assert ran.returncode != 0
    summary = ran.stdout
    assert "setup:" in summary and "python3" in summary, summary
    assert "nothing in /app/results" not in summary + ran.stderr and "collect" not in summary, summary

    full = json.loads(pier("runs", "--json", timeout=60).stdout.splitlines()[0])  # the newest run: this one
    trajectory_id = full["trajectory_id"]
    outputs = full["steps"]["run"]["outputs"]
    assert full["failed_stage"] == "setup" and full["outcome"] == "invalid", full["error"]
    stages = {s["name"]: s["status"] for s in outputs["stages"]}
    assert stages["collect"] == stages["check"] == stages["run_agent"] == "skipped", stages
    assert outputs["checks"] == []
    log = pier("logs", trajectory_id, timeout=60).stdout
    failed = [line for line in log.splitlines() if " failed: " in line]
    assert len(failed) == 1 and "setup failed: " in failed[0], failed
    assert "nothing in /app/results" not in log
