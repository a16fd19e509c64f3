"""Collected logs are masked without being read whole."""

import tracemalloc

from pier.lifecycle.collect import _redact_file
from pier.redact import Redactor

MIB = 1 << 20


def test_a_large_log_is_masked_line_by_line(tmp_path):
    log = tmp_path / "agent.log"
    line = b"x" * 1000 + b"\n"
    with open(log, "wb") as out:
        for n in range(48 * MIB // len(line)):
            out.write(b"token=hunter2-secret\n" if n % 5000 == 0 else line)
    log.chmod(0o644)
    tracemalloc.start()
    _redact_file(Redactor(["hunter2-secret"]), log)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    data = log.read_bytes()
    assert b"hunter2-secret" not in data and data.count(b"token=***\n") > 5
    assert log.stat().st_mode & 0o777 == 0o644
    assert peak < 4 * MIB, f"masking a 48 MiB log took {peak / MIB:.0f} MiB of Python memory"
    assert [p.name for p in tmp_path.iterdir()] == ["agent.log"]  # no copy left beside it


def test_a_log_without_secrets_is_left_as_it_was(tmp_path):
    log = tmp_path / "agent.log"
    log.write_bytes(b"nothing to hide\n")
    before = log.stat().st_ino
    _redact_file(Redactor(["hunter2-secret"]), log)
    assert log.read_bytes() == b"nothing to hide\n" and log.stat().st_ino == before
    assert [p.name for p in tmp_path.iterdir()] == ["agent.log"]
