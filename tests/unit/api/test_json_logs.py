"""PIER_LOG_FORMAT=json: every line `pier serve` writes is one JSON object
with time, level, logger and message, uvicorn's access and error lines
included, and the lines of a run carry its id (and collection) so a run's
every line is found by it; a request's carry its request id. The CLI's own
logging too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.api_server import Server, make_collection

FAKE = "tests.support.fleet_backend:backend"
REPO = Path(__file__).resolve().parents[3]


def lines_of(path: Path) -> list[dict]:
    text = path.read_text()
    assert text.strip(), "the server logged nothing"
    parsed = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"line {number} is not JSON: {line!r}") from None
        assert isinstance(item, dict), line
        assert {"time", "level", "logger", "message"} <= item.keys(), line
        parsed.append(item)
    return parsed


def test_every_line_of_pier_serve_is_json_and_a_runs_lines_carry_its_id(tmp_path):
    settings = {"PIER_LOG_FORMAT": "json", "PIER_SANDBOX_BACKEND": FAKE, "PIER_MAX_CPU": "2"}
    server = Server(home=tmp_path, db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings=settings).start()
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="logs")
        collection.put_task("t", "echo hi")
        tid = collection.run("t")
        assert collection.wait("t", tid, timeout=60)["status"] == "completed"
        with collection.client() as c:
            answered = c.get("/health", headers={"X-Request-ID": "req-from-the-client"})
        assert answered.headers["x-request-id"] == "req-from-the-client"
    finally:
        server.stop()
    lines = lines_of(server.log_path)
    loggers = {line["logger"] for line in lines}
    assert {"uvicorn.access", "uvicorn.error"} <= loggers, loggers
    run_lines = [line for line in lines if line.get("run_id") == tid]
    assert len(run_lines) >= 2, "the run's start and end"
    assert all(line["collection"] == collection.name for line in run_lines)
    assert any(line["message"].endswith(" completed") for line in run_lines)
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert any(line.get("method") == "POST" and line.get("status") == 200 for line in access), access[:3]
    assert any(
        "did you mean PIER_MAX_CPUS?" in line["message"] for line in lines
    )  # the settings' warning too
    assert any(line.get("request_id") for line in lines)


def test_the_cli_logs_json_too(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    env.update(PIER_HOME=str(tmp_path), PIER_RESIDENT="0", PIER_LOG_FORMAT="json", PIER_EXECUTER="x")
    done = subprocess.run([sys.executable, "-m", "pier.cli", "runs"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    warned = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert warned and all(w["level"] == "WARNING" and w["logger"] == "pier.settings" for w in warned)
    assert "did you mean PIER_EXECUTOR?" in warned[0]["message"]
