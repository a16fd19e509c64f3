"""The fleet as an operator sees it: a real Prometheus scrapes `pier serve` and
two `pier worker`s through a 50-run burst, and a receiver in the test takes the
OTLP/HTTP traces all three export. What Prometheus holds equals what the store
holds; no series carries a trajectory id; each run is one trace with its 8
stage spans, across the server and the workers."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from tests.support.api_server import free_port, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on, wait_for
from tests.support.services import require_service

from pier.lifecycle.runner import BEFORE_AGENT, STAGES
from pier.record import RunStatus

RUNS = 50
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
METRICS_TOKEN = "metrics-" + "m" * 32


class Traces:
    """An OTLP/HTTP receiver: it decodes each export (protobuf) and keeps every
    span with its process's service name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, object]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for resource in request.resource_spans:
                        service = next(
                            (
                                a.value.string_value
                                for a in resource.resource.attributes
                                if a.key == "service.name"
                            ),
                            "",
                        )
                        for scope in resource.scope_spans:
                            receiver.spans.extend((service, span) for span in scope.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def by_trace(self) -> dict[str, list[tuple[str, object]]]:
        grouped: dict[str, list[tuple[str, object]]] = defaultdict(list)
        with self.lock:
            for service, span in self.spans:
                grouped[span.trace_id.hex()].append((service, span))
        return grouped

    def close(self) -> None:
        self.server.shutdown()


def start_prometheus(home: Path, server_port: int, workers: list[str]) -> tuple[subprocess.Popen, str]:
    if not Path(PROMETHEUS).exists():
        require_service("Prometheus", "install Debian's prometheus package (/usr/bin/prometheus)")
    port = free_port()
    config = home / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: pier-serve\n"
        f"    authorization: {{credentials: {METRICS_TOKEN}}}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{server_port}']}}]\n"
        "  - job_name: pier-worker\n"
        f"    static_configs: [{{targets: [{', '.join(repr(w) for w in workers)}]}}]\n"
    )
    log = open(home / "prometheus.log", "wb")  # noqa: SIM115 - open while the process lives
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={home / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _ready(url), 30, "Prometheus answers")
    return proc, url


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def query(url: str, promql: str) -> dict[tuple, float]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert answer["status"] == "success", answer
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in answer["data"]["result"]}


@pytest.mark.integration
def test_prometheus_and_traces_see_the_fleet_as_the_store_does(fleet: Fleet, tmp_path: Path) -> None:
    traces = Traces()
    worker_ports = [free_port(), free_port()]
    fleet.settings.update({
        "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
        "PIER_WORKER_SLOTS": "4",
        "PIER_HEARTBEAT_TIMEOUT_SEC": "15",
        "PIER_METRICS_TOKEN": METRICS_TOKEN,
        "OTEL_EXPORTER_OTLP_ENDPOINT": traces.url,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    })  # fmt: skip
    server = fleet.server()
    for name, port in zip(("w1", "w2"), worker_ports, strict=True):
        fleet.settings["PIER_METRICS_ADDRESS"] = f"127.0.0.1:{port}"
        fleet.worker(name)
    prometheus, prom = start_prometheus(tmp_path, server.port, [f"127.0.0.1:{p}" for p in worker_ports])
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="obs")
        collection.put_task("t", "echo hi")
        ids = [collection.run("t") for _ in range(RUNS)]
        store = fleet.store()

        def ended() -> dict[str, str] | None:
            got = {tid: store.get_run(tid).status.value for tid in ids}
            return got if all(RunStatus(s).terminal for s in got.values()) else None

        statuses = wait_for(ended, 60 + RUNS * 1.5, "every run ended", interval=0.5)
        want: dict[str, int] = defaultdict(int)
        for status in statuses.values():
            want[status] += 1

        def scraped() -> dict[str, float] | None:
            got = query(prom, "sum by (status) (pier_runs_ended_total)")
            by_status = {dict(k)["status"]: v for k, v in got.items()}
            return by_status if by_status == {k: float(v) for k, v in want.items()} else None

        wait_for(
            scraped, 30, f"Prometheus counts the runs' ends as the store does ({dict(want)})", interval=1
        )

        # An accept is counted once its submission returns, which under load can
        # come after a worker has ended the run; and each target is scraped on
        # its own: the server's count may reach Prometheus a scrape later.
        def accepted() -> list[float] | None:
            got = list(query(prom, 'sum(pier_runs_accepted_total{job="pier-serve"})').values())
            return got if got == [float(RUNS)] else None

        wait_for(accepted, 30, f"Prometheus counts {RUNS} accepted runs", interval=1)
        # A run whose first half was taken by a worker that never ran it starts
        # again elsewhere (its log says so): those stages ran twice, and count so.
        again = sum(len(ran_on(store, tid)) - 1 for tid in ids)
        stage_counts = query(prom, "sum by (stage) (pier_stage_duration_seconds_count)")
        want_stages = {
            name: float(RUNS + (again if (name, stage) in BEFORE_AGENT else 0)) for name, stage in STAGES
        }
        assert {dict(k)["stage"]: v for k, v in stage_counts.items()} == want_stages
        http = query(prom, 'sum by (route) (pier_http_requests_total{job="pier-serve", method="POST"})')
        assert any("{collection}" in dict(k)["route"] for k in http), http
        series = httpx.get(
            f"{prom}/api/v1/series", params={"match[]": '{__name__=~"pier_.+"}'}, timeout=5
        ).json()
        values = {v for s in series["data"] for v in s.values()}
        assert not values & set(ids), "a series carries a trajectory id"
        assert not any(len(v) == 32 and all(c in "0123456789abcdef" for c in v) for v in values)
        store.close()
    finally:
        prometheus.terminate()
        prometheus.wait(10)
        fleet.close()  # the processes flush their spans on the way out
    try:
        grouped = traces.by_trace()
        for tid in ids:
            spans = grouped.get(tid, [])
            names = [span.name for _, span in spans]
            assert {n for n in names if n.startswith("stage ")} == {f"stage {s}" for s, _ in STAGES}, (
                tid,
                names,
            )
            assert sum(n.startswith("run ") for n in names) == 1, (tid, names)
            services = {service for service, _ in spans}
            assert {"pier-serve", "pier-worker"} <= services, (tid, services, names)
    finally:
        traces.close()
