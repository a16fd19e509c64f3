"""Webhooks: when a run ends, POST its record to the run's webhook_url.

Every attempt carries the Standard Webhooks headers

    webhook-id: msg_<trajectory id>          the same on every attempt: deduplicate on it
    webhook-timestamp: <unix seconds>        when this attempt was signed
    webhook-signature: v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>

(the signature only when the run gave a webhook_secret; a secret spelled
`whsec_<base64>` is used as those bytes, any other as its UTF-8 bytes), and,
for receivers written against earlier versions,

    X-Pier-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

Deliveries are durable: `send` stores one in the database and returns; a
sender on every `pier serve` makes the attempts, with a doubling wait (from
PIER_WEBHOOK_BACKOFF_SEC up to MAX_DELAY_SEC) until the receiver answers 2xx
or PIER_WEBHOOK_WINDOW_SEC has passed since the run ended, across restarts.
An attempt holds a lease on its delivery, so no second attempt overlaps an
open one; its timeout (PIER_WEBHOOK_ATTEMPT_TIMEOUT_SEC) doubles after each
failed attempt, and after one that got no answer in time the next waits at
least that long, so a receiver slower than the timeout gets one more POST
that it has time to answer, not a POST after POST. Each collection has its own lane of PIER_WEBHOOK_LANE attempts at
once: a receiver that hangs delays only its own collection's deliveries.
A fleet's workflow stores its runs' deliveries the same way (`enqueue`), so
there is one delivery mechanism.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx

from pier.db import Store
from pier.db.deliveries import DELIVERED, FAILED, PENDING, StoredDelivery
from pier.db.retry import log_failed_round
from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused
from pier.record import utcnow
from pier.settings import Settings
from pier.telemetry import metrics
from pier.vault import Vault

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Pier-Signature"
EVENT_HEADER = "X-Pier-Event"
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"
MAX_DELAY_SEC = 300.0
MAX_ATTEMPT_SEC = 300.0
POLL_SEC = 1.0  # other servers' deliveries, and due retries, are found this often
BATCH = 100


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


def _key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except ValueError:
            pass  # not base64 after all: the text itself is the key
    return secret.encode()


def standard_signature(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature value (Standard Webhooks, scheme v1)."""
    message = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def delivery_id(trajectory_id: str) -> str:
    """A run's end is delivered once: its delivery id follows from the run."""
    return f"msg_{trajectory_id}"


@dataclass(frozen=True)
class Delivery:
    url: str
    secret: str | None
    body: bytes
    trajectory_id: str
    collection: str = ""

    @property
    def id(self) -> str:
        return delivery_id(self.trajectory_id)


def enqueue(
    store: Store,
    delivery: Delivery,
    sealed_secret: str | None,
    window_sec: float,
    now: datetime | None = None,
) -> bool:
    """Store a delivery for the senders; False when this run's is stored already
    (a retried activity, a restarted server): it is then not sent twice."""
    now = now or utcnow()
    row = StoredDelivery(
        id=delivery.id, collection=delivery.collection, trajectory_id=delivery.trajectory_id,
        url=delivery.url, sealed_secret=sealed_secret, body=delivery.body.decode(), state=PENDING,
        attempts=0, last_error=None, created_at=now, next_attempt_at=now,
        deadline_at=now + timedelta(seconds=window_sec),
    )  # fmt: skip
    return store.enqueue_delivery(row)


@dataclass(frozen=True)
class SenderConfig:
    backoff_sec: float = 1.0
    window_sec: float = 6 * 3600.0
    attempt_timeout_sec: float = 10.0
    lane: int = 2  # attempts at once per collection

    @classmethod
    def of(cls, settings: Settings) -> SenderConfig:
        return cls(
            settings.webhook_backoff_sec,
            settings.webhook_window_sec,
            settings.webhook_attempt_timeout_sec,
            settings.webhook_lane,
        )

    def timeout(self, attempts: int) -> float:
        """The timeout of the attempt after `attempts` failed ones: it doubles,
        so a receiver that is slower than the first timeout gets an attempt
        long enough for it instead of a POST after POST it never answers in time."""
        return min(self.attempt_timeout_sec * 2**attempts, MAX_ATTEMPT_SEC)

    def lease(self, attempts: int) -> timedelta:
        """How long an attempt may hold its delivery: its connect, write and
        read phases each have the timeout, with room to record the outcome."""
        return timedelta(seconds=4 * self.timeout(attempts) + 30)

    def delay(self, attempts: int, timed_out_after: float | None) -> float:
        """The wait before the next attempt, after `attempts` failed ones. After
        an answer that did not come in time it is at least that timeout: the
        receiver may still be working on the last one."""
        delay = min(self.backoff_sec * 2 ** max(attempts - 1, 0), MAX_DELAY_SEC)
        return max(delay, timed_out_after or 0.0)


class WebhookSender:
    """Delivers what is stored, on this server's threads: one lane (a small
    thread pool) per collection."""

    def __init__(self, store: Store, vault: Vault, config: SenderConfig, policy: OutboundPolicy):
        self._store = store
        self._vault = vault
        self._config = config
        self._client = new_client(policy)
        self._lanes: dict[str, ThreadPoolExecutor] = {}
        self._busy: dict[str, int] = {}
        self._open: set[str] = set()  # delivery ids with an attempt in flight here
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="pier-webhooks", daemon=True)
        self._thread.start()

    def send(self, delivery: Delivery) -> None:
        """Store a delivery; returns at once (the attempts come from the lanes)."""
        sealed = self._vault.encrypt(delivery.secret) if delivery.secret else None
        enqueue(self._store, delivery, sealed, self._config.window_sec)
        self._wake.set()

    def close(self, wait: bool = False) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            lanes = list(self._lanes.values())
        for lane in lanes:
            lane.shutdown(wait=wait, cancel_futures=True)
        self._client.close()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(POLL_SEC)
            self._wake.clear()
            try:
                self._dispatch()
            except Exception as exc:  # the database may be away for a while: try again next round
                log_failed_round(log, "webhook sender: could not read the delivery queue", exc)

    def _dispatch(self) -> None:
        now = utcnow()
        for stored in self._store.due_deliveries(now, BATCH, exclude=self._full_lanes()):
            with self._lock:
                if stored.id in self._open or self._busy.get(stored.collection, 0) >= self._config.lane:
                    continue
            if not self._store.lease_delivery(stored.id, now, now + self._config.lease(stored.attempts)):
                continue  # another server's attempt holds it
            with self._lock:
                self._open.add(stored.id)
                self._busy[stored.collection] = self._busy.get(stored.collection, 0) + 1
                lane = self._lanes.get(stored.collection)
                if lane is None:
                    lane = ThreadPoolExecutor(self._config.lane, thread_name_prefix="pier-webhook")
                    self._lanes[stored.collection] = lane
            lane.submit(self._attempt, stored)

    def _full_lanes(self) -> list[str]:
        with self._lock:
            return [name for name, busy in self._busy.items() if busy >= self._config.lane]

    def _attempt(self, stored: StoredDelivery) -> None:
        try:
            secret = self._vault.decrypt(stored.sealed_secret) if stored.sealed_secret else None
            delivery = Delivery(
                stored.url, secret, stored.body.encode(), stored.trajectory_id, stored.collection
            )
            timeout = self._config.timeout(stored.attempts)
            self._record(stored, post(self._client, delivery, timeout), timeout)
        except Exception:
            log.exception("webhook for run %s: the attempt failed", stored.trajectory_id)
        finally:
            with self._lock:
                self._open.discard(stored.id)
                self._busy[stored.collection] -= 1
            self._wake.set()

    def _record(self, stored: StoredDelivery, outcome: Outcome, timeout: float) -> None:
        attempts = stored.attempts + 1
        now = utcnow()
        problem = outcome.problem
        attempt = metrics.attempt_label(attempts)
        if problem is None:
            metrics.webhook_deliveries.labels("delivered", attempt).inc()
            self._store.end_attempt(
                stored.id, state=DELIVERED, attempts=attempts, next_attempt_at=now, error=None
            )
            return
        wait = self._config.delay(attempts, timeout if outcome.unanswered else None)
        later = now + timedelta(seconds=wait)
        if later > stored.deadline_at:
            metrics.webhook_deliveries.labels("gave_up", attempt).inc()
            log.warning(
                "webhook for run %s to %s gave up after %d attempts (its window closed): %s",
                stored.trajectory_id, stored.url, attempts, problem,
            )  # fmt: skip
            self._store.end_attempt(
                stored.id, state=FAILED, attempts=attempts, next_attempt_at=now, error=problem
            )
            return
        metrics.webhook_deliveries.labels("failed", attempt).inc()
        log.info(
            "webhook for run %s: %s; next attempt at %s", stored.trajectory_id, problem, later.isoformat()
        )
        self._store.end_attempt(
            stored.id, state=PENDING, attempts=attempts, next_attempt_at=later, error=problem
        )


def new_client(policy: OutboundPolicy) -> httpx.Client:
    """The one HTTP client webhooks are sent with (each attempt sets its timeout):
    every connection it makes (a redirect's too, were one followed) goes to an
    address the outbound policy allowed, resolved once and connected to as checked."""
    return httpx.Client(
        timeout=SenderConfig.attempt_timeout_sec, follow_redirects=False, transport=PolicyTransport(policy)
    )


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


def headers_for(delivery: Delivery, timestamp: int) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        EVENT_HEADER: "run.ended",
        ID_HEADER: delivery.id,
        TIMESTAMP_HEADER: str(timestamp),
    }
    if delivery.secret:
        headers[SIGNATURE_HEADER] = sign(delivery.secret, timestamp, delivery.body)
        headers[STANDARD_SIGNATURE_HEADER] = standard_signature(
            delivery.secret, delivery.id, timestamp, delivery.body
        )
    return headers


@dataclass(frozen=True)
class Outcome:
    problem: str | None  # None: the receiver took it (2xx)
    unanswered: bool = False  # sent, but no answer came in time


def post(client: httpx.Client, delivery: Delivery, timeout_sec: float) -> Outcome:
    """One attempt, signed now. The answer's body is never read: a receiver
    cannot hold the attempt open by trickling it."""
    headers = headers_for(delivery, int(time.time()))
    try:
        with client.stream(
            "POST", delivery.url, content=delivery.body, headers=headers, timeout=timeout_sec
        ) as response:
            status = response.status_code
    except httpx.ReadTimeout as exc:
        return Outcome(f"no answer within {timeout_sec:g}s ({exc})", unanswered=True)
    except httpx.HTTPError as exc:
        return Outcome(f"{type(exc).__name__}: {exc}")
    if 200 <= status < 300:
        return Outcome(None)
    return Outcome(f"HTTP {status}")
