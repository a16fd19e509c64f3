"""A resident pier process (pier.resident) for a test: on the socket a client
with the test's environment looks for, stopped when the test ends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def socket_of(env: dict[str, str]) -> Path:
    """The socket a client with env looks for (computed as it computes it)."""
    code = "from pier import resident; print(resident.socket_path())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


@contextlib.contextmanager
def serving(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A resident listening on socket_of(env); terminated on the way out."""
    path = socket_of(env)
    process = subprocess.Popen([sys.executable, "-P", "-m", "pier.resident", "serve", str(path)], env=env)
    deadline = time.monotonic() + 60
    try:
        while not path.exists():
            assert process.poll() is None, "the resident exited"
            assert time.monotonic() < deadline, "the resident did not listen in 60 s"
            time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
