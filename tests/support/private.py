"""Services of a test's own, to inject faults into: a PostgreSQL cluster
(initdb + pg_ctl, stopped with `-m immediate` as a crash would), Temporal's
dev server (state in a file, so a restart keeps the workflows) and SeaweedFS
(`weed mini`, as scripts/start-s3.sh starts it), each on ports of its own and
a data folder under /tmp, so that stopping one never touches what other work
on the host uses. Ports come from PIER_TEST_FAULT_PORTS (default 25000-25999).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.services import require_service


def _pg_bin() -> Path:
    """$PIER_TEST_PG_BIN, else the newest Debian PostgreSQL server's binaries."""
    given = os.environ.get("PIER_TEST_PG_BIN")
    if given:
        return Path(given)
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()
TOOLS = Path(os.environ.get("PIER_TOOLS_VENV", "/opt/pier-tools")) / "bin"
PORTS_ENV = "PIER_TEST_FAULT_PORTS"
DATA_PREFIX = "/tmp/pier-faults-"


def _port_range() -> range:
    low, _, high = os.environ.get(PORTS_ENV, "25000-25999").partition("-")
    return range(int(low), int(high) + 1)


def free_ports(count: int) -> list[int]:
    """`count` consecutive ports, free now, in the fault tests' range."""
    candidates = list(_port_range())
    start = int.from_bytes(os.urandom(2)) % max(1, len(candidates) - count)
    for offset in range(len(candidates)):
        base = candidates[(start + offset) % (len(candidates) - count)]
        ports = list(range(base, base + count))
        if all(_free(p) for p in ports):
            return ports
    raise RuntimeError(f"no {count} free consecutive ports in {PORTS_ENV}")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout}s")
        time.sleep(0.2)


def _data_dir(kind: str) -> Path:
    path = Path(f"{DATA_PREFIX}{kind}-{uuid.uuid4().hex[:8]}")
    path.mkdir(parents=True)
    return path


@dataclass
class Postgres:
    """A PostgreSQL cluster of the test's own; run as the `postgres` user."""

    port: int = 0
    data: Path = field(default_factory=lambda: Path())

    @classmethod
    def create(cls) -> Postgres:
        if not (PG_BIN / "pg_ctl").exists():
            require_service("PostgreSQL server binaries", f"no pg_ctl in {PG_BIN} (set PIER_TEST_PG_BIN)")
        if os.geteuid() != 0 or shutil.which("runuser") is None:
            require_service(
                "a private PostgreSQL", "the fault tests start one as the postgres user: run as root"
            )
        pg = cls(port=free_ports(1)[0], data=_data_dir("pg"))
        shutil.chown(pg.data, "postgres", "postgres")
        pg._as_postgres(
            PG_BIN / "initdb", "-D", str(pg.data / "db"), "--auth=trust", "-U", "postgres", "-E", "UTF8"
        )
        return pg.start()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> Postgres:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off -c max_connections=200"
        )
        self._as_postgres(PG_BIN / "pg_ctl", "-D", str(self.data / "db"), "-l", str(self.data / "log"),
                          "-o", options, "-w", "-t", "60", "start")  # fmt: skip
        return self

    def running(self) -> bool:
        return _answers(self.port)

    def start_if_stopped(self) -> None:
        if not self.running():
            self.start()

    def stop(self, mode: str = "immediate") -> None:
        """`immediate`: the server goes at once, as on a crash (clients see their connections drop)."""
        self._as_postgres(
            PG_BIN / "pg_ctl", "-D", str(self.data / "db"), "-m", mode, "-w", "stop", check=False
        )

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)

    def _as_postgres(self, *argv: object, check: bool = True) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *map(str, argv)], check=check,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)  # fmt: skip


class _ServerProcess:
    """What a private service started as one process shares: killing it
    (SIGKILL: the fault), starting it again, removing it with its data."""

    proc: subprocess.Popen | None
    data: Path

    def start(self) -> object:
        raise NotImplementedError

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def start_if_stopped(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def destroy(self) -> None:
        self.kill()
        shutil.rmtree(self.data, ignore_errors=True)


# Temporal's fair dispatch by key (pier's key is the run's collection), as
# docs/fleet.md tells operators to turn it on; scripts/start-temporal.sh too.
FAIRNESS = (
    "--dynamic-config-value", "matching.enableFairness=true",
    "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
    "--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
)  # fmt: skip


@dataclass
class Temporal(_ServerProcess):
    """Temporal's dev server of the test's own, state in a file: kill and
    start it again and the workflows are still there."""

    port: int
    data: Path
    proc: subprocess.Popen | None = None

    @classmethod
    def create(cls) -> Temporal:
        binary = TOOLS / "temporal"
        if not binary.exists():
            require_service(
                "Temporal's CLI", f"no {binary}: run scripts/start-temporal.sh once to install it"
            )
        port, http, metrics, ui = free_ports(4)
        temporal = cls(port=port, data=_data_dir("temporal"))
        temporal._extra = [str(http), str(metrics), str(ui)]  # type: ignore[attr-defined]
        return temporal.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Temporal:
        http, metrics, ui = self._extra  # type: ignore[attr-defined]
        log = open(self.data / "server.log", "ab")  # noqa: SIM115 - the child writes it
        self.proc = subprocess.Popen(
            [str(TOOLS / "temporal"), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
             "--http-port", http, "--metrics-port", metrics, "--ui-port", ui, "--headless",
             "--db-filename", str(self.data / "temporal.db"), "--log-level", "warn", *FAIRNESS],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        wait_until(lambda: _answers(self.port), 60, f"Temporal on {self.address}")
        time.sleep(1.0)  # the frontend listens a moment before the namespace answers
        return self


@dataclass
class SeaweedFS(_ServerProcess):
    """An S3 server of the test's own (SeaweedFS `weed mini`, every port set,
    telemetry off), one bucket; kill it and start it again on the same data."""

    port: int
    base: int
    data: Path
    bucket: str = "pier-faults"
    proc: subprocess.Popen | None = None

    ACCESS_KEY = "pier"
    SECRET_KEY = "pier-secret-key"

    @classmethod
    def create(cls) -> SeaweedFS:
        if not (TOOLS / "weed").exists():
            require_service("SeaweedFS", f"no {TOOLS / 'weed'}: run scripts/start-s3.sh once to install it")
        ports = free_ports(11)
        return cls(port=ports[0], base=ports[1], data=_data_dir("s3")).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def start(self) -> SeaweedFS:
        b = self.base
        log = open(self.data.with_suffix(".log"), "ab")  # noqa: SIM115 - the child writes it
        env = {**os.environ, "AWS_ACCESS_KEY_ID": self.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY}
        self.proc = subprocess.Popen(
            [str(TOOLS / "weed"), "mini", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-s3.port={self.port}", f"-master.port={b}", f"-volume.port={b + 1}", f"-filer.port={b + 2}",
             f"-master.port.grpc={b + 3}", f"-volume.port.grpc={b + 4}", f"-filer.port.grpc={b + 5}",
             f"-s3.port.grpc={b + 6}", f"-admin.port={b + 7}", f"-admin.port.grpc={b + 8}",
             f"-debug.port={b + 9}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
             "-master.telemetry=false", "-admin.ui=false", f"-bucket={self.bucket}"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        log.close()

        def up() -> bool:
            try:
                return httpx.get(f"{self.endpoint}/", timeout=1).status_code in (200, 403)
            except httpx.HTTPError:
                return False

        wait_until(up, 90, f"SeaweedFS on {self.endpoint}")
        return self

    def destroy(self) -> None:
        super().destroy()
        self.data.with_suffix(".log").unlink(missing_ok=True)
