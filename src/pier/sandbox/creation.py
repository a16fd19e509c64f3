"""Making a run's sandbox within the creation budget (20 minutes, retried once)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from pier.errors import CapabilityError, SandboxError
from pier.sandbox.base import LineSink, Sandbox, SandboxBackend, SandboxSource, SandboxSpec

log = logging.getLogger(__name__)

ATTEMPTS = 2
MIN_RETRY_BUDGET_S = 5.0  # a retry with less time left than this cannot succeed


def create_with_retry(
    backend: SandboxBackend,
    spec: SandboxSpec,
    timeout: float,
    *,
    source: SandboxSource | None = None,
    on_line: LineSink | None = None,
) -> Sandbox:
    """A started sandbox for spec, made within timeout seconds, retried once on
    SandboxError while time remains (never on CapabilityError). With source, each
    attempt first gets its image (pulled or built, within the same budget) and runs
    spec on it. Raises the last SandboxError (or ImageError) when both attempts fail."""
    say = on_line or (lambda _line: None)
    deadline = time.monotonic() + timeout
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _attempt(backend, spec, source, say, deadline)
        except CapabilityError:
            raise  # the backend cannot do what spec asks: another attempt cannot either
        except SandboxError as exc:
            remaining = deadline - time.monotonic()
            if attempt == ATTEMPTS or remaining < MIN_RETRY_BUDGET_S:
                raise
            say(f"Sandbox creation failed ({exc}); retrying once ({remaining:.0f}s left)")
            log.warning("sandbox creation attempt %d failed: %s", attempt, exc)
    raise AssertionError("unreachable")


def _attempt(
    backend: SandboxBackend,
    spec: SandboxSpec,
    source: SandboxSource | None,
    say: LineSink,
    deadline: float,
) -> Sandbox:
    if source is not None:
        image = backend.ensure_image(source, say, max(deadline - time.monotonic(), 1.0))
        spec = replace(spec, image=image)
    return backend.create(spec)
