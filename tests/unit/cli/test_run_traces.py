"""`pier run` with the OTLP variables set exports its run's trace, as a
server does, to a real OTLP/HTTP receiver (a listener here that keeps what it
is sent): one trace whose id is the trajectory id, a tree run -> stage ->
invoke_agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.api_server import runbook

FAKE = "tests.support.fleet_backend:backend"


class Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Receiver.bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def test_pier_run_exports_its_trace_tree_over_otlp(tmp_path: Path):
    Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        book = tmp_path / "traced" / "RUNBOOK.md"
        book.parent.mkdir()
        book.write_text(runbook("echo hi", image="pier-fake:latest", snapshot=""))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIER_", "OTEL_"))}
        env.update(PIER_HOME=str(tmp_path / "home"), PIER_RESIDENT="0", PIER_SANDBOX_BACKEND=FAKE,
                   OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_port}")  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "pier.cli", "run", str(book), "--json"], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        tid = json.loads(done.stdout)["trajectory_id"]
    finally:
        server.shutdown()
    assert Receiver.bodies and all(path == "/v1/traces" for path, _ in Receiver.bodies)
    spans = []
    for _, body in Receiver.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    assert {span.trace_id.hex() for span in spans} == {tid}, "one trace, its id the trajectory id"
    by_name = {span.name: span for span in spans}
    root = next(span for span in spans if span.name.startswith("run "))
    assert by_name["stage run_agent"].parent_span_id == root.span_id
    assert by_name["invoke_agent script"].parent_span_id == by_name["stage run_agent"].span_id
    assert sum(name.startswith("stage ") for name in by_name) == 8
