"""Opening a second store on a SQLite file must not drop the lock the first
one holds on it: closing any descriptor of the file drops every POSIX lock the
process has on it, so another process that closes its last connection thinks
itself the last user and removes the write-ahead log from under the first
("database disk image is malformed": a `pier run` beside the in-process bench)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from pier.db import Store

OTHER_PROCESS = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("SELECT count(*) FROM sqlite_master").fetchall()
db.close()
"""


def test_a_second_store_keeps_the_first_ones_lock(tmp_path: Path):
    path = tmp_path / "pier.db"
    Store.open(f"sqlite:///{path}").close()  # the schema, in WAL mode
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("SELECT count(*) FROM sqlite_master").fetchall()  # a user of the log from now on
    try:
        Store.open(f"sqlite:///{path}").close()  # another store in the same process
        subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(path)], check=True, timeout=60)
        # the other process was not the last user: the log stays for this one
        assert Path(f"{path}-wal").exists()
    finally:
        first.close()
