"""A run's log is bounded whatever its sandbox prints: past PIER_MAX_LOG_BYTES
of the agent's output the run's log (the store, the live stream) and each file
of logs/ in its outputs stop growing, and the record says how much was dropped."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import httpx
import pytest
from tests.support.api_server import ADMIN_TOKEN, Server, make_collection

pytestmark = pytest.mark.integration

CAP = 1 << 20
FLOOD = 60 << 20  # 60 MB of stdout, 60 times the cap (the flood: 172 MB in 150 s)


def test_a_stdout_flood_is_cut_at_the_cap_in_the_store_and_in_agent_log(
    tmp_path: Path, docker_backend, base_image
):
    """Before: every line was stored: 172 MB of log rows and a 172 MB agent.log in 150 s."""
    server = Server(
        home=tmp_path, db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings={"PIER_MAX_LOG_BYTES": str(CAP)}
    ).start()
    try:
        collection = make_collection(server, base_image, prefix="flood")
        lines = FLOOD // 1001
        collection.put_task(
            "flood",
            f"{{ yes {'a' * 1000} | head -n {lines}; }} || true; echo the end > {{{{results_dir}}}}/out.txt",
        )
        tid = collection.run("flood")
        followed: list[str] = []

        def follow() -> None:  # the live log keeps working, and ends with the run
            with collection.client() as c, c.stream("GET", f"/api/v1/runs/{tid}/events") as r:
                followed.extend(line for line in r.iter_lines() if line.startswith("event: "))

        follower = threading.Thread(target=follow)
        follower.start()
        record = collection.wait("flood", tid, timeout=300)
        follower.join(60)
        assert record["status"] == "completed", record["error"]
        assert followed and followed[-1] == "event: end", followed[-3:]

        with sqlite3.connect(tmp_path / "pier.db") as db:
            stored = db.execute(
                "SELECT COALESCE(SUM(LENGTH(CAST(line AS BLOB))), 0) FROM run_events WHERE trajectory_id = ?",
                (tid,),
            ).fetchone()[0]
        assert stored < CAP + (64 << 10), f"the store holds {stored} bytes of the run's log"
        warnings = record["steps"]["run"]["outputs"]["warnings"]
        cut = [w for w in warnings if w.startswith("the run's log was cut")]
        assert cut and "PIER_MAX_LOG_BYTES" in cut[0], warnings
        dropped = int(cut[0].split(": ", 1)[1].split(" bytes")[0])
        assert dropped > FLOOD - 2 * CAP, cut[0]

        logs = [p for p in (tmp_path / "storage").rglob("agent.log") if tid in str(p)]
        assert logs, list((tmp_path / "storage").rglob("*"))[:20]
        size = logs[0].stat().st_size
        assert size < CAP + 200, f"agent.log is {size} bytes"
        assert b"[pier] cut here" in logs[0].read_bytes()[-200:]
        assert any(w.startswith("logs/agent.log was cut") for w in warnings), warnings
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
            assert admin.get("/health").status_code == 200
    finally:
        server.stop()
