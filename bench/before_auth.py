"""What an unauthenticated caller costs one real `pier serve` (SQLite, the fake
sandbox backend): the server's RSS grown by ten requests with a 40 MiB header
each, sent at once, and what they were answered, then how many of N connections that never
send a byte are still open after 30 s, and when the server closed the last it
closed (the bound: PIER_HTTP_HEADER_TIMEOUT_SEC, 10 s; past
PIER_HTTP_MAX_CONNECTIONS_PER_ADDRESS, 256, one address's are answered 429 at once).

With --compare PYTHON (another checkout's interpreter, e.g. main's
.venv/bin/python) the same is measured on that checkout's pier in the same run.

    uv run python bench/before_auth.py [--silent 3000] [--compare ../main/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api_server import Server
from tests.support.fleet import FAKE_BACKEND

HEADER = 40 << 20
CHUNK = b"a" * (1 << 16)


def big_header(port: int) -> str:
    """One request whose only header's value is 40 MiB; the server's first answer line."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"GET /api/v1/runs HTTP/1.1\r\nHost: pier\r\nX-Big: ")

    def push() -> None:
        try:
            for _ in range(HEADER // len(CHUNK)):
                sock.sendall(CHUNK)
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # closed by the server: what a bound looks like

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        answer = sock.recv(4096)
    except OSError as exc:
        answer = f"({type(exc).__name__})".encode()
    pusher.join(120)
    sock.close()
    return (answer.split(b"\r\n")[0] or b"(closed, no answer)").decode(errors="replace")


def still_open(sock: socket.socket) -> bool:
    """Not closed by the server (an answer it wrote before closing is read first)."""
    sock.setblocking(False)
    try:
        while sock.recv(4096):
            pass
        return False
    except BlockingIOError:
        return True  # nothing more to read, and not closed
    except OSError:
        return False


def silent(port: int, count: int, wait: float) -> tuple[int, int, float]:
    """Open `count` connections that send nothing; (opened, still open after
    `wait`, seconds until the last one the server closed was closed)."""
    socks = []
    for _ in range(count):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    started = time.monotonic()
    open_now, last_closed = list(socks), 0.0
    while open_now and time.monotonic() - started < wait:
        time.sleep(0.25)
        still = [s for s in open_now if still_open(s)]
        if len(still) < len(open_now):
            last_closed = time.monotonic() - started
        open_now = still
    for s in socks:
        s.close()
    return len(socks), len(open_now), last_closed


def measure(python: str, silent_count: int, wait: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="pier-bench-auth-") as tmp:
        home = Path(tmp)
        server = Server(
            home=home,
            db_url=f"sqlite:///{home / 'pier.db'}",
            settings={"PIER_SANDBOX_BACKEND": FAKE_BACKEND},
            python=python,
        ).start()
        try:
            assert server.proc is not None
            proc = psutil.Process(server.proc.pid)
            big_header(server.port)  # what a first request loads, loaded
            time.sleep(1)
            before = proc.memory_info().rss
            with ThreadPoolExecutor(10) as pool:  # at once, as an attacker would
                answers = list(pool.map(big_header, [server.port] * 10))
            peak = proc.memory_info().rss
            time.sleep(2)
            after = proc.memory_info().rss
            opened, left, last = silent(server.port, silent_count, wait)
        finally:
            server.stop()
    return {
        "rss_before_mb": before / 2**20,
        "rss_peak_mb": peak / 2**20,
        "rss_after_mb": after / 2**20,
        "answers": sorted(set(answers)),
        "silent_opened": opened,
        "silent_left": left,
        "silent_last_closed_s": last,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silent", type=int, default=3000, help="silent connections to open")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for them to be closed")
    parser.add_argument("--compare", help="another checkout's python, measured the same way")
    args = parser.parse_args()
    sides = {"this": sys.executable, **({"compared": args.compare} if args.compare else {})}
    for side, python in sides.items():
        got = measure(python, args.silent, args.wait)
        print(
            f"{side}: RSS {got['rss_before_mb']:.0f} -> {got['rss_peak_mb']:.0f} MB around ten 40 MiB headers "
            f"(+{got['rss_peak_mb'] - got['rss_before_mb']:.0f} MB; {got['rss_after_mb']:.0f} MB 2 s later), "
            f"answered {got['answers']}; {got['silent_left']} of {got['silent_opened']} silent "
            f"connections still open after {args.wait:.0f} s (the last closed after "
            f"{got['silent_last_closed_s']:.1f} s)"
        )


if __name__ == "__main__":
    main()
