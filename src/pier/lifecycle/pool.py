"""The warm pool: sandboxes created and started ahead of runs, so that a run
whose plan matches one (same image, same limits) claims it instead of waiting
for create. Only a long-lived process keeps one (`pier serve`).

The rules:

- A pool sandbox is unused until claimed, and a claim takes it out of the pool
  for good: it is never handed to a second run, and the run deletes it when it
  ends, as any sandbox. The pool then creates a replacement in the background:
  when that run's sandbox is deleted (so the replacement's create does not
  compete with the run for the engine), or at the next check, whichever is first.
- Its labels are fixed at create (Docker labels cannot change), so they say
  "pool" (pier.pool) with a run label of its own (`pool-...`), and pier.owner
  names this process. A claimed one is tied to its run by the run record
  (sandbox.id, sandbox.pool "hit") and to the process that claimed it by that
  owner label: the sweep keeps it while the process lives (the process deletes
  it when the run ends or the pool closes) and removes it once the process is
  gone, claimed or not, so a crash leaves no pool sandbox behind.
- Idle pool sandboxes are not runs: they do not take a run slot
  (PIER_MAX_CONCURRENT_RUNS), so the engine holds at most that many run
  sandboxes plus the pool's size. A claimed one is its run's sandbox and counts
  as such, in the run's slot.
- Refills come after runs: while a run is creating its sandbox (a miss), the
  pool makes none, so that a burst of runs has the engine to itself and the
  pool catches up in the gaps.
- Every PIER_WARM_POOL_CHECK_SEC the pool lists the engine's sandboxes, drops
  its idle ones that no longer run (an engine restart stops them all) and
  creates what is missing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pier.agents import get_agent
from pier.errors import PierError
from pier.sandbox import resolve_source
from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_OWNER,
    LABEL_RUN,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
)
from pier.sandbox.owner import owner_label
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings, WarmPoolEntry

log = logging.getLogger(__name__)

LABEL_POOL = "pier.pool"
POOL_RUN_PREFIX = "pool-"


@dataclass(frozen=True)
class PoolKey:
    """What a run must match to claim a pool sandbox."""

    image: str
    limits: Limits


def pool_limits(entry: WarmPoolEntry, settings: Settings) -> Limits:
    """The limits a run of this source gets when its step sets none."""
    return Limits(
        cpus=entry.cpus or settings.default_cpus,
        memory=entry.memory or settings.default_memory,
        pids=settings.pids_limit,
        disk=settings.disk_limit,
        network=entry.network,
    )


class WarmPool:
    """Ready sandboxes per PoolKey. Thread-safe: runs claim from worker threads
    while the keeper thread refills."""

    def __init__(self, backend: SandboxBackend, settings: Settings):
        self.backend = backend
        self.settings = settings
        self._wanted: dict[PoolKey, int] = {}
        self._idle: dict[PoolKey, list[Sandbox]] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a sandbox joined the pool, or a run's create ended
        self._creating = 0  # runs creating their own sandbox right now: refills wait for them
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the keeper -----------------------------------------------------------

    def start(self) -> WarmPool:
        self._thread = threading.Thread(target=self._keep, name="pier-warm-pool", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop refilling and delete every idle sandbox (claimed ones are their runs')."""
        self._stopped.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()  # a refill waiting for runs stops waiting
        if self._thread is not None:
            self._thread.join(timeout=60)
        with self._lock:
            idle = [s for sandboxes in self._idle.values() for s in sandboxes]
            self._idle.clear()
        for sandbox in idle:
            sandbox.delete()

    def _keep(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self._wanted:
                    self._resolve()
                self.refresh()
                self.fill()
            except Exception as exc:  # an engine hiccup: try again at the next check
                log.warning("warm pool: %s", exc)
            self._wake.wait(self.settings.warm_pool_check_sec)
            self._wake.clear()

    def _resolve(self) -> None:
        """The image and limits of every configured entry (images built or pulled
        once, as for a run)."""
        catalog = SnapshotCatalog(self.settings)
        for entry in self.settings.warm_pool:
            source = resolve_source(
                snapshot=entry.snapshot or "",
                image=entry.image,
                base_image=self.settings.base_image,
                apt_packages=(),
                pip_packages=(),
                catalog=catalog,
                settings=self.settings,
            )
            image = self.backend.ensure_image(
                source, lambda line: log.debug("warm pool: %s", line), self.settings.create_timeout_sec
            )
            image = self._layer(entry, image)
            key = PoolKey(image, pool_limits(entry, self.settings))
            self._wanted[key] = self._wanted.get(key, 0) + entry.size
            log.info("warm pool: keeping %d sandbox(es) of %s ready", self._wanted[key], image)

    def _layer(self, entry: WarmPoolEntry, image: str) -> str:
        """The entry's agent layer on image (as a run of that agent gets it), or image."""
        recipe = get_agent(entry.agent).layer() if entry.agent and self.settings.agent_layers else None
        if recipe is None:
            return image
        layer = self.backend.ensure_layer(
            image,
            recipe,
            lambda line: log.debug("warm pool: %s", line),
            self.settings.agent_install_timeout_sec,
        )
        return layer.image if layer else image

    def refresh(self) -> None:
        """Drop idle sandboxes that stopped running (an engine restart)."""
        with self._lock:
            if not any(self._idle.values()):
                return
        running = {info.id for info in self.backend.list_sandboxes() if info.running}
        gone: list[Sandbox] = []
        with self._lock:
            for key, sandboxes in self._idle.items():
                gone += [s for s in sandboxes if s.id not in running]
                self._idle[key] = [s for s in sandboxes if s.id in running]
        for sandbox in gone:
            log.info("warm pool: sandbox %s stopped; replacing it", sandbox.id[:12])
            sandbox.delete()

    def fill(self) -> None:
        """Create what each key lacks, one at a time (the engine's pace is the limit)."""
        for key, want in self._wanted.items():
            while not self._stopped.is_set() and self.idle_count(key) < want:
                if not self._after_runs():
                    return
                sandbox = self.backend.create(self._spec(key))
                with self._changed:
                    self._idle.setdefault(key, []).append(sandbox)
                    self._changed.notify_all()

    def _after_runs(self) -> bool:
        """Wait until no run is creating a sandbox (runs come first); False when
        the pool closed meanwhile."""
        with self._changed:
            self._changed.wait_for(lambda: self._creating == 0 or self._stopped.is_set())
        return not self._stopped.is_set()

    @contextmanager
    def run_creating(self) -> Iterator[None]:
        """Held by a run while it creates its own sandbox: the pool refills after."""
        with self._changed:
            self._creating += 1
        try:
            yield
        finally:
            with self._changed:
                self._creating -= 1
                self._changed.notify_all()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every configured source has its size ready; False on timeout."""

        def full() -> bool:
            wanted = dict(self._wanted)
            return bool(wanted) and all(len(self._idle.get(k, [])) >= n for k, n in wanted.items())

        with self._changed:
            return self._changed.wait_for(full, timeout)

    def _spec(self, key: PoolKey) -> SandboxSpec:
        labels = {
            LABEL_RUN: f"{POOL_RUN_PREFIX}{uuid.uuid4().hex}",
            LABEL_POOL: "idle",
            LABEL_CREATED: str(int(time.time())),
            LABEL_OWNER: owner_label(),
        }
        return SandboxSpec(image=key.image, limits=key.limits, labels=labels)

    # --- runs -----------------------------------------------------------------

    def idle_count(self, key: PoolKey | None = None) -> int:
        with self._lock:
            if key is not None:
                return len(self._idle.get(key, []))
            return sum(len(s) for s in self._idle.values())

    def claim(self, spec: SandboxSpec) -> Sandbox | None:
        """A ready sandbox for spec, taken out of the pool for good; None when none
        matches (the caller creates one). Only specs that need nothing at create
        beyond image and limits can match: no env, no files, not on an egress
        network (a run with an allow-list creates its own sandbox)."""
        if spec.env or spec.files or spec.network_name or spec.dns or spec.volumes:
            return None
        key = PoolKey(spec.image, spec.limits)
        while True:
            with self._lock:
                sandboxes = self._idle.get(key)
                if not sandboxes:
                    return None
                sandbox = sandboxes.pop(0)
            if self._still_running(sandbox):
                return sandbox
            sandbox.delete()

    def refill(self) -> None:
        """Top the pool up now, in the background (a run ended: its sandbox is gone)."""
        self._wake.set()

    def _still_running(self, sandbox: Sandbox) -> bool:
        try:
            self.backend.attach(sandbox.id)
        except PierError:
            return False
        return True


PoolFactory = Callable[[SandboxBackend, Settings], WarmPool]
