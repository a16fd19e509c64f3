"""What a sandbox's stdout flood costs one real `pier serve` (SQLite, Docker):
a run whose agent prints --mb MB of lines, then the bytes of its log the store
holds (run_events), the size of its agent.log, and the server's RSS and CPU
seconds (user + system, its start-up included) at the end,
beside the cap (PIER_MAX_LOG_BYTES, default 50 MB). With --compare PYTHON
(another checkout's interpreter) the same run on that checkout's pier, in the
same bench run.

    uv run python bench/log_flood.py [--mb 200] [--compare ../before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api_server import Server, make_collection


def flood(python: str, mb: int, image: str) -> str:
    with tempfile.TemporaryDirectory(prefix="pier-flood-") as tmp:
        home = Path(tmp)
        server = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", python=python).start()
        try:
            collection = make_collection(server, image, prefix="flood")
            lines = (mb << 20) // 1001
            collection.put_task(
                "flood",
                f"{{ yes {'a' * 1000} | head -n {lines}; }} || true; echo the end > {{{{results_dir}}}}/out.txt",
            )
            started = time.monotonic()
            tid = collection.run("flood")
            record = collection.wait("flood", tid, timeout=1800)
            took = time.monotonic() - started
            proc = psutil.Process(server.proc.pid) if server.proc else None
            rss = proc.memory_info().rss >> 20 if proc else 0
            cpu = sum(proc.cpu_times()[:2]) if proc else 0.0  # the server's user + system seconds
            with sqlite3.connect(home / "pier.db") as db:
                stored = db.execute(
                    "SELECT COALESCE(SUM(LENGTH(CAST(line AS BLOB))), 0) FROM run_events WHERE trajectory_id = ?",
                    (tid,),
                ).fetchone()[0]
            logs = [p for p in (home / "storage").rglob("agent.log") if tid in str(p)]
            size = logs[0].stat().st_size if logs else 0
            db_size = (home / "pier.db").stat().st_size
            return (
                f"{mb} MB printed in {took:.0f} s, status {record['status']}: store holds {stored / 1e6:.1f} MB of "
                f"log rows (database file {db_size / 1e6:.1f} MB), agent.log {size / 1e6:.1f} MB, server RSS {rss} MB, "
                f"server CPU {cpu:.1f} s"
            )
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--compare", help="another checkout's python, measured in the same run")
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    args = parser.parse_args()
    print("this:", flood(sys.executable, args.mb, args.image), flush=True)
    if args.compare:
        print("compared:", flood(args.compare, args.mb, args.image), flush=True)


if __name__ == "__main__":
    main()
