"""The warm pool on the fake backend, through the real lifecycle: a claim is
never handed out twice, a claimed sandbox is pristine, the pool refills, a plan
that does not match creates fresh, a crash leaves nothing after a sweep, and a
stopped engine's sandboxes are replaced."""

from __future__ import annotations

import subprocess
import threading

import pytest

from pier.lifecycle.pool import LABEL_POOL, PoolKey, WarmPool, pool_limits
from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox.base import LABEL_OWNER, Limits, SandboxInfo, SandboxSpec
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine, Script
from pier.sandbox.owner import owner_label
from pier.sandbox.sweeper import sweep
from pier.settings import Settings, WarmPoolEntry
from pier.tasks import step_override, task_from_runbook

RUNBOOK = f"""---
agent: script
snapshot: ""
image: {FAKE_IMAGE}
---
```bash
echo hello > /app/results/out.txt
```
"""
READY_S = 10


class StoppableBackend(FakeBackend):
    """A fake engine whose sandboxes can be stopped, as an engine restart does."""

    stopped: set[str]

    def list_sandboxes(self) -> list[SandboxInfo]:
        return [
            SandboxInfo(i.id, i.labels, running=i.id not in self.stopped) for i in super().list_sandboxes()
        ]

    def attach(self, sandbox_id: str):
        from pier.errors import SandboxError

        if sandbox_id in self.stopped:
            raise SandboxError(f"sandbox {sandbox_id[:12]} is not running")
        return super().attach(sandbox_id)


def write_results(sandbox, call):
    sandbox.put_files("/app/results", {"out.txt": b"hello\n"})
    sandbox.put_files("/app", {"left-behind.txt": b"from an earlier run"})


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(
        home=tmp_path / "home",
        ca_bundle=None,
        warm_pool=[WarmPoolEntry(image=FAKE_IMAGE, size=2)],
        warm_pool_check_sec=3600,  # refills come from claims only, not from the clock
    )


@pytest.fixture
def backend(engine) -> StoppableBackend:
    backend = StoppableBackend(engine=engine, program=Script().on(r"script\.sh", write_results))
    backend.stopped = set()
    return backend


@pytest.fixture
def pool(backend, settings):
    pool = WarmPool(backend, settings).start()
    assert pool.wait_ready(READY_S), "the pool never filled"
    yield pool
    pool.close()


def key(settings: Settings) -> PoolKey:
    return PoolKey(FAKE_IMAGE, pool_limits(settings.warm_pool[0], settings))


def spec(settings: Settings, **limits) -> SandboxSpec:
    base = pool_limits(settings.warm_pool[0], settings)
    return SandboxSpec(image=FAKE_IMAGE, limits=Limits(**{**base.__dict__, **limits}), labels={})


def start_run(settings, backend, pool, **step):
    services = Services(settings, pool=pool)
    services.__dict__["backend"] = backend
    task = task_from_runbook(parse(RUNBOOK))
    if step:
        task = task.model_copy(update={"step_configs": {"run": step_override(task.run_step(), **step)}})
    return run(services, RunRequest(collection="tests", task_name="t", task=task))


def test_a_pool_sandbox_is_never_handed_to_two_claimants(pool, settings, monkeypatch):
    monkeypatch.setattr(pool, "fill", lambda: None)  # no refill meanwhile: exactly two to hand out
    wanted = spec(settings)
    got, barrier = [], threading.Barrier(8)

    def claim():
        barrier.wait()
        got.append(pool.claim(wanted))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claimed = [s.id for s in got if s is not None]
    assert len(claimed) == 2 and len(set(claimed)) == 2, claimed  # the pool held two


def test_a_run_claims_a_pristine_sandbox_and_deletes_it(pool, settings, backend, engine):
    ready = {s.id for s in pool._idle[key(settings)]}
    first = start_run(settings, backend, pool)
    assert first.status == RunStatus.completed, first.error
    assert first.outputs.sandbox is not None and first.outputs.sandbox.pool == "hit"
    assert first.outputs.sandbox.id in ready
    assert first.outputs.sandbox.id not in engine.sandboxes, "a claimed sandbox is deleted with its run"
    assert pool.wait_ready(READY_S)
    second_ready = {s.id for s in pool._idle[key(settings)]}
    assert first.outputs.sandbox.id not in second_ready, "a used sandbox went back to the pool"
    second = start_run(settings, backend, pool)
    assert second.outputs.sandbox is not None and second.outputs.sandbox.pool == "hit"
    assert second.outputs.sandbox.id != first.outputs.sandbox.id
    # Nothing of the first run is in any sandbox the pool holds now.
    for sandbox in pool._idle[key(settings)]:
        assert not sandbox.host_path("/app/left-behind.txt").exists()
        assert not sandbox.host_path("/app/results").exists()


def test_the_pool_refills_after_a_claim(pool, settings):
    before = {s.id for s in pool._idle[key(settings)]}
    taken = pool.claim(spec(settings))
    assert taken is not None and pool.idle_count(key(settings)) == 1
    pool.refill()  # what a run does once its sandbox is deleted
    assert pool.wait_ready(READY_S), "no replacement was made"
    after = {s.id for s in pool._idle[key(settings)]}
    assert len(after) == 2 and taken.id not in after and len(after - before) == 1
    taken.delete()


def test_a_plan_that_does_not_match_creates_fresh_and_says_miss(pool, settings, backend):
    before = {s.id for s in pool._idle[key(settings)]}
    record = start_run(settings, backend, pool, cpus=1.5)
    assert record.status == RunStatus.completed, record.error
    assert record.outputs.sandbox is not None and record.outputs.sandbox.pool == "miss"
    assert record.outputs.sandbox.id not in before
    assert {s.id for s in pool._idle[key(settings)]} == before, "the pool was touched"


def test_hit_and_miss_show_in_the_run_log(pool, settings, backend):
    services = Services(settings, pool=pool)
    services.__dict__["backend"] = backend
    hit = start_run(settings, backend, pool)
    lines = [e.line for e in services.store.events(hit.trajectory_id)]
    assert any(line.startswith("warm pool: hit") for line in lines), lines
    miss = start_run(settings, backend, pool, memory="1G")
    lines = [e.line for e in services.store.events(miss.trajectory_id)]
    assert any(line.startswith("warm pool: miss") for line in lines), lines


def test_without_a_pool_the_record_says_nothing_of_one(settings, backend):
    record = start_run(settings, backend, None)
    assert record.outputs.sandbox is not None and record.outputs.sandbox.pool is None


def test_a_crash_leaves_no_pool_sandbox_after_a_sweep(backend, settings, engine, monkeypatch):
    """The pool's process dies (its owner label names a process that is gone):
    the sweep removes its sandboxes, idle or claimed."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    monkeypatch.setattr("pier.lifecycle.pool.owner_label", lambda: owner_label(dead.pid))
    monkeypatch.setattr("pier.sandbox.fake.owner_label", lambda: owner_label(dead.pid))
    pool = WarmPool(backend, settings).start()
    try:
        assert pool.wait_ready(READY_S)
        claimed = pool.claim(spec(settings))
        pool.refill()
        assert claimed is not None and pool.wait_ready(READY_S)
        pooled = [i for i in backend.list_sandboxes() if LABEL_POOL in i.labels]
        assert len(pooled) == 3 and all(i.labels[LABEL_OWNER] == owner_label(dead.pid) for i in pooled)
        # A live owner keeps them: the sweep of a running server leaves its pool alone.
        monkeypatch.setattr("pier.sandbox.sweeper.owner_alive", lambda label: True)
        assert sweep(backend, lambda trajectory_id: None) == []
        monkeypatch.undo()
        swept = sweep(backend, lambda trajectory_id: None)
    finally:
        pool._stopped.set()
    assert len(swept) >= 3 and not [i for i in backend.list_sandboxes() if LABEL_POOL in i.labels]


def test_sandboxes_an_engine_restart_stopped_are_replaced(pool, settings, backend, engine):
    old = {s.id for s in pool._idle[key(settings)]}
    backend.stopped |= old
    pool.refresh()
    assert pool.idle_count(key(settings)) == 0
    pool._wake.set()
    assert pool.wait_ready(READY_S)
    assert not {s.id for s in pool._idle[key(settings)]} & old
    assert not old & set(engine.sandboxes), "the stopped ones were not removed"


def test_a_claim_skips_a_sandbox_that_stopped_since_the_last_check(pool, settings, backend):
    first, second = pool._idle[key(settings)]
    backend.stopped.add(first.id)
    claimed = pool.claim(spec(settings))
    assert claimed is not None and claimed.id == second.id
    claimed.delete()


def test_a_warm_pool_entry_names_one_source():
    with pytest.raises(ValueError, match="exactly one"):
        WarmPoolEntry(size=1)
    with pytest.raises(ValueError, match="exactly one"):
        WarmPoolEntry(image="a", snapshot="b")


def test_a_spec_on_an_egress_network_never_claims(pool, settings):
    from dataclasses import replace

    wanted = replace(spec(settings), network_name="pier-egress", dns=("10.0.0.1",))
    assert pool.claim(wanted) is None
    assert pool.idle_count(key(settings)) == 2


def test_the_pool_refills_only_once_no_run_is_creating_a_sandbox(pool, settings, backend):
    """Runs come first: a refill asked for while a run creates its own sandbox (a
    miss) waits until that create is over, so a burst has the engine to itself."""
    taken = pool.claim(spec(settings))
    assert taken is not None and pool.idle_count(key(settings)) == 1
    creates: list[str] = []
    entered, release = threading.Event(), threading.Event()
    create = backend.create

    def watched_create(wanted: SandboxSpec):
        if LABEL_POOL in wanted.labels:
            creates.append("pool")
            return create(wanted)
        creates.append("run")
        entered.set()
        release.wait(READY_S)
        made = create(wanted)
        creates.append("run created")
        return made

    backend.create = watched_create  # type: ignore[method-assign]
    runner = threading.Thread(target=start_run, args=(settings, backend, pool), kwargs={"cpus": 1.5})
    runner.start()
    try:
        assert entered.wait(READY_S), "the run never created its sandbox"
        pool.refill()
        release_after = threading.Timer(0.5, release.set)  # the keeper had time to jump the queue
        release_after.start()
        assert pool.wait_ready(READY_S), "the pool never refilled"
        assert creates == ["run", "run created", "pool"], creates
    finally:
        release.set()
        runner.join(READY_S)
        taken.delete()
