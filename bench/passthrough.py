"""The chat-completions passthrough's cost, in one run: the latency a call
through `pier serve` (`POST /v1/chat/completions` without a runbook: the API,
the loopback model gateway, the usage record) adds to the same call sent
straight to the provider, for answers (p50, p95) and streams (time to the last
chunk, p50).

The provider is the tests' scripted model server on 127.0.0.1, the operator's
upstream for openai (PIER_UPSTREAMS); the server stores in a SQLite file. Both
paths use the official OpenAI SDK, one client each, sequential calls. Needs
nothing but this machine.

    uv run python bench/passthrough.py [--calls 200] [--streams 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api_server import ADMIN_TOKEN, Server
from tests.support.model_server import ModelServer

KEY = "sk-bench-" + uuid.uuid4().hex
MESSAGES = [{"role": "user", "content": "Say hello."}]


def timed(count: int, call: Callable[[], object]) -> list[float]:
    call()  # warm: connections, the gateway's first start
    times = []
    for _ in range(count):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--streams", type=int, default=40)
    args = parser.parse_args()
    provider = ModelServer("127.0.0.1").start()
    home = Path(tempfile.mkdtemp(prefix="pier-bench-passthrough-"))
    settings = {"PIER_UPSTREAMS": json.dumps({"openai": f"{provider.url}/v1"})}
    server = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    try:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        with server.client(ADMIN_TOKEN) as admin:
            token = admin.post("/api/v1/collections", json={"name": name}).json()["token"]
            admin.patch(f"/api/v1/collections/{name}/environment",
                        json={"environment_variables": {"OPENAI_API_KEY": KEY}}).raise_for_status()  # fmt: skip
        direct = OpenAI(base_url=f"{provider.url}/v1", api_key=KEY, max_retries=0)
        through = OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)

        def answer(client: OpenAI) -> Callable[[], object]:
            return lambda: client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)

        def stream(client: OpenAI) -> Callable[[], object]:
            return lambda: list(
                client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
            )

        rows = [
            ("answer", timed(args.calls, answer(direct)), timed(args.calls, answer(through))),
            ("stream", timed(args.streams, stream(direct)), timed(args.streams, stream(through))),
        ]
        print(
            f"{'call':8} {'direct p50':>11} {'pier p50':>9} {'added p50':>10} {'direct p95':>11} {'pier p95':>9}"
        )
        for kind, base, via in rows:
            b50, v50 = statistics.median(base), statistics.median(via)
            print(
                f"{kind:8} {b50:9.1f}ms {v50:7.1f}ms {v50 - b50:8.1f}ms {p95(base):9.1f}ms {p95(via):7.1f}ms"
            )
        with server.client(token) as c:
            totals = c.get(f"/api/v1/collections/{name}/usage").json()["totals"]
        print(f"usage recorded: {totals['requests']} requests, {totals['total_tokens']} tokens, "
              f"${totals['cost_usd']:.4f}")  # fmt: skip
    finally:
        server.stop()
        provider.stop()


if __name__ == "__main__":
    main()
