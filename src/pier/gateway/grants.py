"""Per-run grants: the token a run's sandbox holds instead of the provider key, what
it may spend, and what it has spent. Shared between the gateway's event loop (which
counts) and the run's thread (which opens, reads and closes), hence the lock."""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from pier.outbound import Allowed

if TYPE_CHECKING:  # a plan holds a Budget without loading the HTTP and price libraries
    from pier.gateway.usage import CallUsage

TOKEN_PREFIX = "pier-run-"
MAX_CALLS = 1000  # model calls listed one by one on a run's usage; the totals count them all


class Budget(BaseModel):
    """An optional per-run ceiling on model use; a request past it is refused."""

    model_config = ConfigDict(extra="forbid")

    requests: int | None = Field(None, ge=1, description="model API requests")
    tokens: int | None = Field(None, ge=1, description="prompt plus completion tokens")
    cost_usd: float | None = Field(None, gt=0, description="list price of those tokens, in USD")

    def exceeded(self, spent: Spent) -> str | None:
        """Why one more request would go past the budget, or None."""
        if self.requests is not None and spent.requests >= self.requests:
            return f"{spent.requests} requests made, budget {self.requests}"
        if self.tokens is not None and spent.total_tokens >= self.tokens:
            return f"{spent.total_tokens} tokens used, budget {self.tokens}"
        if self.cost_usd is not None and spent.cost_usd >= self.cost_usd:
            return f"${spent.cost_usd:.4f} spent, budget ${self.cost_usd:g}"
        return None


@dataclass
class Spent:
    requests: int = 0
    model_calls: int = 0  # requests whose answer reported usage
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # model calls whose model has no known price
    cost_sources: Counter[str] = field(default_factory=Counter)  # provider / price table -> calls
    calls: list[dict[str, Any]] = field(default_factory=list)  # the first MAX_CALLS, in order
    statuses: Counter[int] = field(default_factory=Counter)  # the provider's answers by HTTP status
    last_status: int | None = None
    last_error: tuple[int, str] | None = None  # the last error answer: status, message

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, call: CallUsage) -> None:
        self.model_calls += 1
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.cached_tokens += call.cache_read_tokens
        if call.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += call.cost_usd
            self.cost_sources[call.cost_source or "price table"] += 1
        if len(self.calls) < MAX_CALLS:
            self.calls.append({
                "id": call.response_id, "model": call.model, "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens, "cached_tokens": call.cache_read_tokens,
                "cost_usd": call.cost_usd,
            })  # fmt: skip

    def answered(self, status: int, message: str | None) -> None:
        self.statuses[status] += 1
        self.last_status = status
        if status >= 400:
            self.last_error = (status, message or "")

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "requests": self.requests,
            "api_calls": self.model_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": round(self.cost_usd, 6),
        }
        if self.cost_sources:
            data["cost_source"] = " and ".join(sorted(self.cost_sources))
        if self.unpriced_calls:
            data["unpriced_calls"] = self.unpriced_calls
        if self.statuses:
            data["answers"] = {str(status): n for status, n in sorted(self.statuses.items())}
        if self.last_error is not None:
            data["last_error"] = {"status": self.last_error[0], "message": self.last_error[1]}
        if self.calls:
            data["calls"] = [dict(call) for call in self.calls]
        return data


@dataclass
class Grant:
    """One run's right to reach one provider through the gateway."""

    trajectory_id: str
    provider: str
    key: str  # the real provider key: never leaves the host
    upstream: str  # the provider's base URL, e.g. https://api.anthropic.com
    budget: Budget
    expires_at: float  # monotonic
    token: str = field(default_factory=lambda: TOKEN_PREFIX + secrets.token_urlsafe(32))
    spent: Spent = field(default_factory=Spent)
    refused: str | None = None  # why the budget stopped a request, once it did
    # Destinations the operator named for upstream, beyond the outbound policy.
    allowed: tuple[Allowed, ...] = ()
    upstream_refused: str | None = None  # why the outbound policy refused upstream, once it did
    closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def live(self) -> bool:
        return not self.closed and time.monotonic() < self.expires_at

    def admit(self) -> str | None:
        """Count one request, or say why the budget refuses it (and remember that)."""
        with self._lock:
            reason = self.budget.exceeded(self.spent)
            if reason is not None:
                self.refused = self.refused or reason
                return reason
            self.spent.requests += 1
            return None

    def record(self, call: CallUsage) -> None:
        with self._lock:
            self.spent.add(call)

    def answered(self, status: int, message: str | None = None) -> None:
        """The provider's answer to one forwarded request (502: it could not be reached)."""
        with self._lock:
            self.spent.answered(status, message)

    def trouble(self) -> ProviderTrouble | None:
        """The provider's refusal or failure, when its last answer was one."""
        with self._lock:
            spent = self.spent
            if spent.last_status is None or spent.last_status < 400 or spent.last_error is None:
                return None
            status, message = spent.last_error
            alike = sum(n for s, n in spent.statuses.items() if _kind(s) == _kind(status))
            return ProviderTrouble(self.provider, status, message, alike, sum(spent.statuses.values()))

    def usage(self) -> dict[str, Any]:
        with self._lock:
            return self.spent.as_dict()


def _kind(status: int) -> str:
    if status in (401, 403):
        return "refused"
    if status == 429:
        return "rate_limited"
    return "failed" if status >= 500 else "other"


@dataclass(frozen=True)
class ProviderTrouble:
    """How the provider answered a run's requests when they went wrong: the last
    error answer (status and message), how many answers were of its kind (401 and
    403 alike, 5xx alike) out of all it gave."""

    provider: str
    status: int
    message: str
    count: int
    requests: int

    @property
    def kind(self) -> str:
        """refused (401/403), rate_limited (429), failed (5xx) or other (another 4xx)."""
        return _kind(self.status)


class Grants:
    """The live grants of one gateway, by token."""

    def __init__(self) -> None:
        self._by_token: dict[str, Grant] = {}
        self._lock = threading.Lock()

    def open(self, grant: Grant) -> Grant:
        with self._lock:
            self._drop_expired()
            self._by_token[grant.token] = grant
        return grant

    def find(self, token: str | None) -> Grant | None:
        if not token:
            return None
        with self._lock:
            grant = self._by_token.get(token)
        return grant if grant is not None and grant.live else None

    def close(self, grant: Grant) -> None:
        with self._lock:
            grant.closed = True
            self._by_token.pop(grant.token, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_token)

    def _drop_expired(self) -> None:
        for token in [t for t, g in self._by_token.items() if not g.live]:
            del self._by_token[token]
