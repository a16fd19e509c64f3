"""For the API tests: a real `pier serve` process on a free loopback port, a
fresh store for it (SQLite file or PostgreSQL schema), and a collection to act in."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from pier.db.engine import scratch_schema
from pier.record import RunStatus
from pier.sandbox.base import LABEL_COLLECTION
from tests.support.s3 import s3_scratch_url
from tests.support.services import postgres_url

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
    python: str = sys.executable  # another checkout's interpreter runs its own pier (bench --compare)

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
            # stop() (SIGTERM) waits this long for runs in flight, then ends them
            "PIER_DRAIN_TIMEOUT_SEC": "10",
            **self.settings,
        }

    def start(self, port: int | None = None) -> Server:
        """Start on a free port, or on `port` (the same one again, for a restart)."""
        self.port = port or free_port()
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it
        self.proc = subprocess.Popen(
            [self.python, "-m", "pier.cli", "serve", "--host", "127.0.0.1", "--port", str(self.port),
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


UPLOAD_LIMIT = 1024 * 1024
SLOTS = 4


STORAGES = ["local", "s3"]


def storage_settings(storage: str) -> dict[str, str]:
    """The settings that put a server's outputs and uploads on `storage`: the
    local folder (the default) or a fresh prefix of the test S3 bucket."""
    if storage == "local":
        return {}
    return {"PIER_STORAGE_URL": s3_scratch_url()}


def postgres_schema() -> Iterator[str]:
    """A fresh schema for one server's store, dropped afterwards."""
    return scratch_schema(postgres_url(), prefix="pier_api")


def ended(record: dict) -> bool:
    return RunStatus(record["status"]).terminal


@dataclass
class Collection:
    name: str
    token: str
    server: Server
    image: str

    def client(self, token: str | None = None) -> httpx.Client:
        return self.server.client(token or self.token)

    def put_task(self, task: str, script: str, **front: object) -> None:
        front.setdefault("snapshot", "")
        front.setdefault("image", self.image)
        with self.client() as c:
            r = c.put(f"/api/v1/tasks/{self.name}/{task}", content=runbook(script, **front),
                      headers={"Content-Type": "text/markdown"})  # fmt: skip
        assert r.status_code == 200, r.text

    def run(self, task: str, **body: object) -> str:
        with self.client() as c:
            r = c.post(f"/api/v1/run/{self.name}/{task}", json=body)
        assert r.status_code == 200, r.text
        return r.json()["trajectory_id"]

    def record(self, task: str, trajectory_id: str) -> dict:
        with self.client() as c:
            r = c.get(f"/api/v1/db/trajectory/{self.name}/{task}/{trajectory_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait(
        self, task: str, trajectory_id: str, timeout: float = 120, done: Callable[[dict], bool] = ended
    ) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            record = self.record(task, trajectory_id)
            if done(record):
                return record
            assert time.monotonic() < deadline, f"run still {record['status']} after {timeout}s"
            time.sleep(0.2)

    def sandboxes(self, backend) -> list:
        return [s for s in backend.list_sandboxes() if s.labels.get(LABEL_COLLECTION) == self.name]


def make_collection(server: Server, image: str, prefix: str = "api") -> Collection:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with server.client(ADMIN_TOKEN) as c:
        r = c.post("/api/v1/collections", json={"name": name})
    assert r.status_code == 201, r.text
    return Collection(name=name, token=r.json()["token"], server=server, image=image)
