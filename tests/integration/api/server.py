"""A real `pier serve` process on a free loopback port, for the API tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ADMIN_TOKEN = "admin-" + "x" * 40
START_TIMEOUT_SEC = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    home: Path
    db_url: str
    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / f"server-{self.port}.log"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PIER_HOME": str(self.home),
            "PIER_DATABASE_URL": self.db_url,
            "PIER_ADMIN_TOKEN": ADMIN_TOKEN,
            # Tests share the engine with other work: touch only this server's runs.
            "PIER_SWEEP_FOREIGN": "false",
            **self.settings,
        }

    def start(self) -> Server:
        self.port = free_port()
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pier.cli", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "info"],
            stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True,
        )  # fmt: skip
        log.close()
        self._wait_up()
        return self

    def _wait_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"pier serve exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"pier serve did not come up in {START_TIMEOUT_SEC}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, as a service manager would; SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as on a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self, token: str | None = ADMIN_TOKEN, timeout: float = 60) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


def runbook(script: str, **front: object) -> str:
    """A script-agent runbook; with image= it needs no build."""
    front.setdefault("agent", "script")
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# test\n\n```bash\n{script}\n```\n"
