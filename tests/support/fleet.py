"""For the fleet tests: Temporal's dev server (scripts/start-temporal.sh), a
`pier serve` with PIER_EXECUTOR=temporal, and `pier worker` processes, all on
one PostgreSQL store and one PIER_HOME (local storage: the workers share this
host's disk), on a task queue of their own."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from cryptography.fernet import Fernet
from temporalio.client import Client

from pier.db import Store
from tests.support.api_server import ADMIN_TOKEN, Server
from tests.support.services import require_service
from tests.support.waits import wait_for

TEMPORAL_ENV = "PIER_TEST_TEMPORAL_ADDRESS"
REPO = Path(__file__).resolve().parents[2]
FAKE_BACKEND = "tests.support.fleet_backend:backend"


def temporal_address() -> str:
    """Temporal's dev server the fleet tests use ($PIER_TEST_TEMPORAL_ADDRESS)."""
    address = os.environ.get(TEMPORAL_ENV, "").strip()
    if not address:
        require_service(
            "Temporal",
            f"{TEMPORAL_ENV} is not set: run scripts/start-temporal.sh and export the address it prints",
        )
    return address


@dataclass
class Worker:
    identity: str
    proc: subprocess.Popen
    log_path: Path

    def kill(self) -> None:
        """SIGKILL: the host dies mid-whatever."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Fleet:
    home: Path
    db_url: str
    address: str
    settings: dict[str, str] = field(default_factory=dict)
    queue: str = field(default_factory=lambda: f"pier-test-{uuid.uuid4().hex[:10]}")
    key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    workers: list[Worker] = field(default_factory=list)
    servers: list[Server] = field(default_factory=list)
    # a checkout whose pier the servers and workers run, with its .venv (bench --compare)
    repo: Path = REPO
    python: str = sys.executable

    def env(self) -> dict[str, str]:
        pythonpath = os.pathsep.join(p for p in (str(self.repo), os.environ.get("PYTHONPATH")) if p)
        return {
            "PIER_EXECUTOR": "temporal",
            "PIER_TEMPORAL_ADDRESS": self.address,
            "PIER_TEMPORAL_TASK_QUEUE": self.queue,
            "PIER_SECRET_KEY": self.key,
            "PIER_HEARTBEAT_TIMEOUT_SEC": "5",
            "PIER_SCHEDULE_TO_START_SEC": "5",
            "PIER_WORKER_SLOTS": "2",
            "PIER_OUTBOUND_ALLOW": "127.0.0.1",  # the tests' webhook receivers listen there
            "PYTHONPATH": pythonpath,
            **self.settings,
        }

    def server(self) -> Server:
        server = Server(self.home, self.db_url, settings=self.env(), python=self.python).start()
        self.servers.append(server)
        return server

    def worker(self, identity: str) -> Worker:
        log_path = self.home / f"worker-{identity}.log"
        env = {**os.environ, **Server(self.home, self.db_url).env(), **self.env()}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "pier.cli", "worker", "--identity", identity],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=self.repo,
            )  # fmt: skip
        worker = Worker(identity, proc, log_path)
        self.workers.append(worker)
        return worker

    def store(self) -> Store:
        return Store.open(self.db_url)

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        for server in self.servers:
            server.stop()


@dataclass
class Seen:
    """One log event as a follower got it: `ts` is when the emitting process
    logged it, `received` when it reached the follower (both time.time())."""

    seq: int
    ts: float
    line: str
    received: float


@dataclass
class Follower:
    """An SSE follower of one run on one server, in a thread of its own: it
    resumes after `after` (Last-Event-ID) and reads until the run's end event or
    until the server goes away (`broken`)."""

    server: Server
    token: str
    trajectory_id: str
    after: int = 0
    seen: list[Seen] = field(default_factory=list)
    end: str | None = None
    broken: BaseException | None = None
    connected: float | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Follower:
        self._thread = threading.Thread(target=self.follow, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float = 180) -> Follower:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), (
            f"the follower of {self.trajectory_id} still reads after {timeout}s"
        )
        return self

    @property
    def seqs(self) -> list[int]:
        return [s.seq for s in self.seen]

    def follow(self) -> Follower:
        """Read the stream here (not in a thread) to its end or the server's loss."""
        url = f"/api/v1/runs/{self.trajectory_id}/events"
        try:
            with (
                self.server.client(self.token, timeout=180) as c,
                c.stream("GET", url, headers={"Last-Event-ID": str(self.after)}) as response,
            ):
                assert response.status_code == 200, response.status_code
                self.connected = time.time()
                self._read(response.iter_lines())
        except httpx.TransportError as exc:  # the server went away mid-stream
            self.broken = exc
        return self

    def _read(self, lines) -> None:
        event = None
        for line in lines:
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "log":
                data = json.loads(line.removeprefix("data: "))
                self.seen.append(Seen(data["seq"], _epoch(data["ts"]), data["line"], time.time()))
            elif line.startswith("data: ") and event == "end":
                self.end = json.loads(line.removeprefix("data: "))["status"]
                return


def _epoch(iso: str) -> float:
    stamp = datetime.fromisoformat(iso)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def ran_on(store: Store, trajectory_id: str) -> list[str]:
    """The workers that took the run, in order (from its log)."""
    lines = [e.line for e in store.events(trajectory_id)]
    return [line.split()[1] for line in lines if line.startswith("worker ") and line.endswith(" runs it")]


def history_json(address: str, namespace: str, workflow_id: str) -> str:
    """A workflow's whole history as Temporal keeps it (JSON), followed by every
    payload in it decoded (the JSON holds them base64-encoded), so that a value
    in the history is found by searching this text."""

    async def fetch() -> str:
        client = await Client.connect(address, namespace=namespace)
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        return history.to_json()

    text = asyncio.run(fetch())
    return "\n".join([text, *_payloads(json.loads(text))])


def _payloads(node: object) -> list[str]:
    if isinstance(node, list):
        return [text for item in node for text in _payloads(item)]
    if not isinstance(node, dict):
        return []
    found = []
    if isinstance(node.get("data"), str) and "metadata" in node:
        found.append(base64.b64decode(node["data"]).decode(errors="replace"))
    return found + [text for value in node.values() for text in _payloads(value)]


__all__ = [
    "ADMIN_TOKEN",
    "Fleet",
    "Follower",
    "Seen",
    "Worker",
    "history_json",
    "ran_on",
    "temporal_address",
    "wait_for",
]
