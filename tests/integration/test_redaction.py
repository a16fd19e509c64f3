"""A secret the agent prints, as written or encoded, is masked everywhere pier
stores it: the agent log file, the run record (check output) and the events."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.redact import MASK
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

SECRET = "tok-9Qx/7+b2=Lm?&zz-Xk3"
# Shell lines that print the secret: base64 (plain, shifted by one and two bytes in a
# longer stream, base64url), hex both cases, URL-encoding. python3 is in the test image.
PRINTERS = r"""
printf %s "$PIER_REDACT_TOKEN" | base64 -w0; echo
printf 'x%s\n' "$PIER_REDACT_TOKEN" | base64 -w0; echo
printf 'xy%s--' "$PIER_REDACT_TOKEN" | base64 -w0 | tr '+/' '-_'; echo
printf %s "$PIER_REDACT_TOKEN" | od -An -tx1 | tr -d ' \n'; echo
printf %s "$PIER_REDACT_TOKEN" | od -An -tx1 | tr -d ' \n' | tr a-f A-F; echo
python3 -c 'import os, urllib.parse; print(urllib.parse.quote(os.environ["PIER_REDACT_TOKEN"], safe=""))'
"""


def forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {
        "base64": base64.b64encode(raw).decode().rstrip("=")[:-1],
        "base64 shifted": base64.b64encode(b"x" + raw + b"\n").decode()[2:-6],
        "base64url": base64.urlsafe_b64encode(b"xy" + raw + b"--").decode()[3:-6],
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "url": quote(secret, safe=""),
        "literal": secret,
    }


def leaks(text: str) -> list[str]:
    return [name for name, form in forms(SECRET).items() if form in text]


def test_encoded_forms_of_a_secret_are_masked_in_log_file_record_and_events(base_image, tmp_path):
    (tmp_path / "scripts").mkdir()
    script = PRINTERS + "\n{ " + PRINTERS.strip().replace("\n", "; ") + "; } > {{results_dir}}/printed.txt\n"
    checks = [{"name": "show", "type": "code", "source": "scripts", "run": "cat /app/results/printed.txt"}]
    front = {
        "agent": "script",
        "snapshot": "",
        "checks": checks,
        "secrets": {"TOKEN": {"env": "PIER_REDACT_TOKEN"}},
    }
    text = (
        "---\n"
        + "\n".join(f"{k}: {json.dumps(v)}" for k, v in front.items())
        + f"\n---\n# t\n\n```bash\n{script}\n```\n"
    )
    request = RunRequest(
        collection="redact-tests",
        task_name="t",
        task=task_from_runbook(parse(text)),
        run_params={"snapshot": "", "image": base_image},
        env={"PIER_REDACT_TOKEN": SECRET},
        source_dir=tmp_path,
    )
    services = Services(get_settings())
    record = run(services, request)
    assert record.status.value == "completed", record.error

    printed = (run_folder(record) / "results" / "printed.txt").read_text()
    assert set(leaks(printed)) == set(forms(SECRET)) - {"literal"}, "the agent printed every form"

    agent_log = (run_folder(record) / "logs" / "agent.log").read_text()
    assert agent_log.count(MASK) >= 6 and not leaks(agent_log), agent_log

    (show,) = record.outputs.checks
    assert show.output.count(MASK) == 6 and not leaks(show.output), show.output
    stored = services.store.get_run(record.trajectory_id).model_dump_json()
    run_json = (run_folder(record) / "run.json").read_text()
    assert not leaks(stored) and not leaks(run_json)

    lines = "\n".join(e.line for e in services.store.events(record.trajectory_id))
    assert lines.count(MASK) >= 6 and not leaks(lines), lines
