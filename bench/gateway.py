"""The model gateway's cost, in one run: the latency it adds to a model request
(p50, p95) and to the first byte of a streamed answer, against the same requests
sent straight to the provider.

The "provider" is a small local server (uvicorn + starlette on 127.0.0.1) that
answers a Messages-shaped JSON body at once, or streams SSE events 20 ms apart;
the gateway runs as pier runs it (a thread with its own event loop), holding one
grant. Both paths use one keep-alive httpx client, sequential requests. Needs
nothing but this machine.

    uv run python bench/gateway.py [--requests 300] [--streams 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
from collections.abc import AsyncIterator, Callable

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from pier.gateway import Budget, Gateway

KEY = "sk-bench-real-key"
USAGE = {"input_tokens": 100, "output_tokens": 20}
EVENTS = 10
EVENT_GAP_S = 0.02


async def messages(request: Request):
    body = await request.json()
    if not body.get("stream"):
        return JSONResponse(
            {"id": "m", "type": "message", "content": [{"type": "text", "text": "ok"}], "usage": USAGE}
        )

    async def events() -> AsyncIterator[bytes]:
        start = {"type": "message_start", "message": {"usage": USAGE}}
        yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
        for _ in range(EVENTS):
            await asyncio.sleep(EVENT_GAP_S)
            yield b'event: content_block_delta\ndata: {"delta": {"text": "x"}}\n\n'
        yield b'event: message_delta\ndata: {"usage": {"output_tokens": 20}}\n\n'

    return StreamingResponse(events(), media_type="text/event-stream")


def start_provider() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def timed(count: int, call: Callable[[], float | None]) -> list[float]:
    call()  # warm the connection
    return [t for t in (call() for _ in range(count)) if t is not None]


def one_request(client: httpx.Client, url: str, headers: dict) -> Callable[[], float]:
    def call() -> float:
        started = time.perf_counter()
        answer = client.post(url, headers=headers, json={"model": "claude-sonnet-4-5", "messages": []})
        answer.raise_for_status()
        return time.perf_counter() - started

    return call


def first_byte(client: httpx.Client, url: str, headers: dict) -> Callable[[], float]:
    def call() -> float:
        started = time.perf_counter()
        body = {"model": "claude-sonnet-4-5", "messages": [], "stream": True}
        with client.stream("POST", url, headers=headers, json=body) as answer:
            chunks = answer.iter_raw()
            next(chunks)
            elapsed = time.perf_counter() - started
            for _ in chunks:
                pass
        return elapsed

    return call


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--streams", type=int, default=40)
    args = parser.parse_args()

    upstream = start_provider()
    gateway = Gateway("127.0.0.1").start()
    grant = gateway.open("bench", "anthropic", KEY, upstream, Budget(), ttl_s=3600)
    via = gateway.base_url(grant)
    direct_headers, via_headers = {"x-api-key": KEY}, {"x-api-key": grant.token}
    with httpx.Client(timeout=30) as client:
        direct = timed(args.requests, one_request(client, f"{upstream}/v1/messages", direct_headers))
        through = timed(args.requests, one_request(client, f"{via}/v1/messages", via_headers))
        direct_ttfb = timed(args.streams, first_byte(client, f"{upstream}/v1/messages", direct_headers))
        through_ttfb = timed(args.streams, first_byte(client, f"{via}/v1/messages", via_headers))
    gateway.stop()

    print(f"model request, {args.requests} sequential (ms):  p50   p95")
    print(f"  direct                                  {pct(direct, 50):6.2f} {pct(direct, 95):6.2f}")
    print(f"  through the gateway                     {pct(through, 50):6.2f} {pct(through, 95):6.2f}")
    print(f"  added                                   {pct(through, 50) - pct(direct, 50):6.2f} "
          f"{pct(through, 95) - pct(direct, 95):6.2f}")  # fmt: skip
    print(f"streaming time to first byte, {args.streams} streams (ms):")
    print(
        f"  direct                                  {pct(direct_ttfb, 50):6.2f} {pct(direct_ttfb, 95):6.2f}"
    )
    print(
        f"  through the gateway                     {pct(through_ttfb, 50):6.2f} {pct(through_ttfb, 95):6.2f}"
    )
    print(f"  added                                   {pct(through_ttfb, 50) - pct(direct_ttfb, 50):6.2f} "
          f"{pct(through_ttfb, 95) - pct(direct_ttfb, 95):6.2f}")  # fmt: skip
    usage = grant.usage()
    print(
        f"gateway counted {usage['requests']} requests, {usage['total_tokens']} tokens, ${usage['cost_usd']:.4f}"
    )
    stream_total = EVENTS * EVENT_GAP_S * 1000
    print(
        f"(each stream lasts about {stream_total:.0f} ms: a gateway that buffered would add that to the first byte)"
    )


if __name__ == "__main__":
    main()
