"""Webhooks: when a run ends, POST its record to the run's webhook_url.

The body is signed like Stripe's: the header

    X-Pier-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

lets the receiver check both the sender and the age (replays). Delivery runs on
background threads and retries with exponential backoff, so a slow or failing
receiver never holds up a run or the API. A fleet (PIER_EXECUTOR=temporal)
delivers from a Temporal activity instead, whose retries outlive any process;
both make each attempt with `post`, so the receiver cannot tell them apart.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Pier-Signature"
EVENT_HEADER = "X-Pier-Event"
TIMEOUT_SEC = 10.0
MAX_DELAY_SEC = 300.0


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The X-Pier-Signature value for body sent at timestamp."""
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(
    secret: str, header: str, body: bytes, tolerance_sec: float = 300, now: float | None = None
) -> bool:
    """For receivers (and tests): whether header signs body and is recent."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((now or time.time()) - timestamp) > tolerance_sec:
        return False
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


@dataclass(frozen=True)
class Delivery:
    url: str
    secret: str | None
    body: bytes
    trajectory_id: str


class WebhookSender:
    def __init__(self, attempts: int, backoff_sec: float, policy: OutboundPolicy, workers: int = 4):
        self._attempts = attempts
        self._backoff = backoff_sec
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pier-webhook")
        self._client = new_client(policy)

    def send(self, delivery: Delivery) -> None:
        """Queue a delivery; returns at once."""
        self._pool.submit(self._deliver, delivery)

    def close(self, wait: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        self._client.close()

    def _deliver(self, delivery: Delivery) -> bool:
        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            problem = self._post(delivery)
            if problem is None:
                return True
            if attempt == self._attempts:
                log.warning(
                    "webhook for run %s to %s gave up after %d attempts: %s",
                    delivery.trajectory_id, delivery.url, attempt, problem,
                )  # fmt: skip
                return False
            log.info("webhook for run %s: %s; retrying in %.1fs", delivery.trajectory_id, problem, delay)
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_SEC)
        return False

    def _post(self, delivery: Delivery) -> str | None:
        return post(self._client, delivery)


def new_client(policy: OutboundPolicy) -> httpx.Client:
    """The one HTTP client webhooks are sent with: every connection it makes (a
    redirect's too, were one followed) goes to an address the outbound policy
    allowed, resolved once and connected to as checked."""
    return httpx.Client(timeout=TIMEOUT_SEC, follow_redirects=False, transport=PolicyTransport(policy))


class PolicyTransport(httpx.BaseTransport):
    """Resolves each request's host once, refuses it unless the outbound policy
    allows every address, and sends the request to the checked address itself
    (Host header and TLS name unchanged), so a name re-resolving to another
    address between the check and the connection changes nothing."""

    def __init__(self, policy: OutboundPolicy):
        self._policy = policy
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            address = self._policy.resolve(url.host, port)[0]
        except OutboundRefused as exc:
            raise httpx.ConnectError(str(exc), request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"{url.host} does not resolve ({exc})", request=request) from None
        request.url = url.copy_with(host=address)
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": url.host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def check_url(url: str, policy: OutboundPolicy, field_name: str = "webhook_url") -> None:
    """At accept: InputError (422) when the webhook's destination is refused now
    (an address or a name resolving to one). It is judged again at each attempt."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InputError(f"{field_name}: {url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError(f"{field_name} must be an http:// or https:// URL with a host")
    policy.check_name(parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80), field_name)


def post(client: httpx.Client, delivery: Delivery) -> str | None:
    """One attempt, signed now: None when the receiver accepted it (2xx), else
    what went wrong."""
    headers = {"Content-Type": "application/json", EVENT_HEADER: "run.ended"}
    if delivery.secret:
        headers[SIGNATURE_HEADER] = sign(delivery.secret, int(time.time()), delivery.body)
    try:
        response = client.post(delivery.url, content=delivery.body, headers=headers)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if response.is_success:
        return None
    return f"HTTP {response.status_code}"
