"""The run's stages, one function each (docs/architecture.md). Each takes the RunContext,
does its work, and raises StageError (or a PierError) when the run must stop."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pier.agents import Agent
from pier.agents.base import AgentLaunch
from pier.agents.toolcalls import ToolCalls
from pier.errors import InputError, SandboxError, StageError
from pier.gateway.routing import ModelRoute, without_provider_keys
from pier.lifecycle.admission import FLOOR_PER_CPU, gate_for
from pier.lifecycle.assets import setup_tar
from pier.lifecycle.check import (
    check_stage,
    check_tools,
    probe_sources,
    record_eval,
    refuse_missing_check_tools,
    sources_before_agent,
)
from pier.lifecycle.collect import collect_outputs
from pier.lifecycle.context import RunContext
from pier.lifecycle.notices import report_limit_notes
from pier.lifecycle.outcomes import Outcome
from pier.lifecycle.plan import plan_run
from pier.lifecycle.save import check_room, full_scratch, no_space, save_outputs
from pier.lifecycle.sessions import claim_kept, collection_snapshot, continued, wants_keep
from pier.lifecycle.verdict import provider_message, run_usage, trouble_outcome
from pier.lifecycle.volumes import run_mounts
from pier.record import RUN_STEP, SandboxRecord, VolumeRecord
from pier.sandbox import create_with_retry, resolve_source
from pier.sandbox.base import (
    LABEL_COLLECTION,
    LABEL_CREATED,
    LABEL_DEADLINE,
    LABEL_OWNER,
    LABEL_RUN,
    ExecResult,
    LayerRecipe,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
    VolumeMount,
)
from pier.sandbox.dockerfile import read_ca_bundle
from pier.sandbox.owner import owner_label
from pier.sandbox.processes import STOP_PROCESSES_SCRIPT
from pier.sandbox.snapshots import LABEL_AGENTS, SnapshotCatalog, image_mcp_servers, promise_shortfalls
from pier.sandbox.source import check_registries
from pier.sandbox.tarutil import FileTar
from pier.settings.files import make_private_dir
from pier.telemetry import metrics

log = logging.getLogger(__name__)

SANDBOX_DIRS = ("/app/assets", "/app/results", "/app/checks", "/logs/agent", "/run/pier")
REQUIRED_TOOLS = ("bash", "mkdir", "rm", "cat", "tee", "timeout", "kill")


def prepare(ctx: RunContext) -> None:
    step, plan, ctx.agent = plan_run(ctx.task, ctx.run_params, ctx.inputs, ctx.settings)
    ctx.redactor.add(plan.secret_values)
    ctx.plan = plan
    record = ctx.record
    record.init_params = record.run.inputs = ctx.redactor.data(step.init_params)
    record.step_configs[RUN_STEP] = record.run.config = ctx.task.run_step().model_dump(mode="json")
    record.outputs.agent, record.outputs.model = plan.agent, plan.model
    record.outputs.warnings = list(plan.warnings)
    for warning in plan.warnings:
        ctx.log(f"warning: {warning}")
    ctx.log(f"agent {plan.agent}, {len(plan.assets)} attached file(s), time limit {plan.timeout_sec}s")
    probe_sources(ctx)


def create(ctx: RunContext) -> None:
    plan = ctx.require_plan()
    settings = ctx.settings
    if plan.continue_from is not None:  # the sandbox of an earlier run, kept: docs/sessions.md
        ctx.sandbox = claim_kept(ctx)
        metrics.sandboxes_live.inc()
        return
    catalog = SnapshotCatalog(settings)
    # a snapshot the collection saved from a run (`pier snapshot save`) comes first
    source = collection_snapshot(ctx.backend, plan.collection, plan.snapshot) or resolve_source(
        snapshot=plan.snapshot,
        image=plan.image,
        base_image=plan.base_image,
        apt_packages=plan.apt_packages,
        pip_packages=plan.pip_packages,
        catalog=catalog,
        settings=settings,
    )
    ctx.source = source
    ctx.log(source.log_line)
    for note in source.notes:
        ctx.log(f"warning: {note}")
        ctx.record.outputs.warnings.append(note)
    deadline = time.monotonic() + settings.create_timeout_sec
    # Again just before the engine connects: a name may point elsewhere since accept.
    check_registries(settings.outbound, {"image": plan.image, "base_image": plan.base_image})
    ctx.image = ctx.backend.ensure_image(source, ctx.log, timeout=settings.create_timeout_sec)
    ctx.image_labels = ctx.backend.image_labels(ctx.image)
    snapshot = catalog.get(source.name) if source.kind == "snapshot" and source.name else None
    if snapshot is not None and snapshot.origin == "built-in":
        for note in promise_shortfalls(source.name or "", catalog.facts(ctx.backend, ctx.image)):
            ctx.log(f"warning: {note}")
            ctx.record.outputs.warnings.append(note)
    ctx.image = agent_layer(ctx, ctx.image)
    open_run_egress(ctx)
    spec = replace(sandbox_spec(ctx), volumes=_volume_mounts(ctx))
    pooled = _claim(ctx, spec)
    if pooled is not None:
        ctx.sandbox = pooled
    else:
        with ctx.pool.run_creating() if ctx.pool else contextlib.nullcontext():  # the pool refills after
            ctx.sandbox = _create(ctx, spec, deadline)
    metrics.sandboxes_live.inc()
    report_limit_notes(ctx, tuple(ctx.sandbox.notes))
    cpus = ctx.sandbox.applied.cpus if ctx.sandbox.applied else plan.cpus
    runtime = ctx.backend.runtime
    ctx.record.outputs.sandbox = SandboxRecord(
        source=source.kind,
        name=source.name,
        image=ctx.image,
        cpus=cpus,
        memory=plan.memory,
        network=plan.network,
        id=ctx.sandbox.id,
        pool=None if ctx.pool is None else ("hit" if pooled else "miss"),
        runtime=runtime,
        volumes=[VolumeRecord(name=name, path=path, read_only=ro) for name, path, ro in plan.volumes],
    )
    shown = f"runtime {runtime}, " if runtime else ""
    ctx.log(
        f"sandbox {ctx.sandbox.id[:12]} up ({shown}{cpus:g} CPUs, {plan.memory}, network {_onoff(plan.network)})"
    )


def _volume_mounts(ctx: RunContext) -> tuple[VolumeMount, ...]:
    """The collection's volumes the runbook mounts (made on first use by the
    backend); only the run sandbox's, not a fresh one's for checks."""
    plan = ctx.require_plan()
    if not plan.volumes:
        return ()
    try:
        mounts = run_mounts(ctx.backend, plan.collection, plan.volumes, ctx.settings.volumes_per_collection)
    except InputError as exc:
        raise StageError("create", str(exc)) from None
    for (name, path, read_only), mount in zip(plan.volumes, mounts, strict=True):
        ctx.log(f"volume {name} ({mount.name}) at {path}{' read-only' if read_only else ''}")
    return mounts


def _create(ctx: RunContext, spec: SandboxSpec, deadline: float) -> Sandbox:
    settings = ctx.settings
    gate = gate_for(
        ctx.backend,
        ceiling=settings.max_concurrent_runs,
        start=FLOOR_PER_CPU * (os.cpu_count() or 1),
        fixed=settings.create_concurrency or None,
    )
    timed = metrics.sandbox_operation.labels("create", ctx.backend.runtime or "unknown").time()
    with gate.admitted(), timed:  # the engine's pace decides how many creates go at once (admission.py)
        return create_with_retry(ctx.backend, spec, timeout=max(deadline - time.monotonic(), 60))


def agent_layer(ctx: RunContext, image: str) -> str:
    """The image with the run's agent CLI in it (built once per image and pin, then
    cached), or `image` itself when the agent installs nothing, layers are off
    (PIER_AGENT_LAYERS=false) or the backend makes none: setup installs it then.
    A missing layer is built while the run waits only when its sandbox cannot
    install (no open network); otherwise the sandbox installs, as fast as a build
    would without its commit, and setup starts the build in the background."""
    plan = ctx.require_plan()
    recipe = ctx.agent.layer() if ctx.agent is not None else None
    if recipe is not None and _in_image(ctx.image_labels, recipe):
        ctx.agent_layer = image  # the snapshot carries the CLI at its pin: nothing to install
        ctx.log(f"agent: {recipe.name} {recipe.version} is in the image; nothing to install")
        return image
    if recipe is None or not ctx.settings.agent_layers:
        return image
    background = ctx.settings.agent_layer_background and plan.network and plan.network_allow is None
    timeout = ctx.settings.agent_install_timeout_sec
    layer = ctx.backend.ensure_layer(image, recipe, ctx.log, timeout=timeout, wait=not background)
    if layer is None:
        return image
    if not layer.ready:
        ctx.layer_pending = (image, recipe)
        ctx.log(f"agent layer: not built yet ({recipe.name} {recipe.version}, {layer.image}); "
                "the sandbox installs the CLI")  # fmt: skip
        return image
    ctx.agent_layer = layer.image
    how = "cached" if layer.built_s is None else f"built in {layer.built_s:.1f} s"
    ctx.log(f"agent layer: {how} ({recipe.name} {recipe.version}, {layer.image})")
    return layer.image


def _in_image(labels: Mapping[str, str], recipe: LayerRecipe) -> bool:
    """Whether the image says (its pier.agents label, written by a build whose
    install step verified the version) that it has recipe's CLI at its pin."""
    pins = dict(entry.partition("=")[::2] for entry in labels.get(LABEL_AGENTS, "").split(",") if entry)
    return pins.get(recipe.name) == recipe.version


def _build_layer_after_install(ctx: RunContext, installed_s: float) -> None:
    """The run's sandbox installed the CLI: build the layer for later runs, off this
    run's path (once: a build under way already is left to finish)."""
    assert ctx.layer_pending is not None
    image, recipe = ctx.layer_pending
    try:
        started = ctx.backend.start_layer_build(image, recipe, ctx.settings.agent_install_timeout_sec)
    except (SandboxError, OSError) as exc:  # the run has its CLI; a later run tries the build again
        ctx.log(f"warning: agent layer: the background build did not start: {exc}")
        return
    how = "building in the background" if started else "another build of it is under way"
    ctx.log(f"agent layer: {how}; installed in the sandbox in {installed_s:.1f} s")


def _claim(ctx: RunContext, spec: SandboxSpec) -> Sandbox | None:
    """A ready sandbox from the warm pool when one matches the plan, else None."""
    if ctx.pool is None:
        return None
    sandbox = ctx.pool.claim(spec)
    metrics.pool_claims.labels("miss" if sandbox is None else "hit").inc()
    if sandbox is None:
        ctx.log(f"warm pool: miss (no ready sandbox of {spec.image} with these limits); creating one")
    else:
        ctx.log(f"warm pool: hit (claimed ready sandbox {sandbox.id[:12]})")
    return sandbox


def sandbox_spec(ctx: RunContext) -> SandboxSpec:
    """A sandbox of the run's image, limits and labels (the run's own, or a fresh
    one for checks)."""
    plan, settings = ctx.require_plan(), ctx.settings
    assert ctx.image is not None, "create has not resolved the image"
    limits = Limits(
        cpus=plan.cpus,
        memory=plan.memory,
        pids=settings.pids_limit,
        disk=settings.disk_limit,
        network=plan.network,
    )
    spec = SandboxSpec(image=ctx.image, limits=limits, labels=_labels(ctx))
    egress = ctx.egress
    if egress is None or not plan.network:
        return spec
    trust_env, trust_files = egress.trust(read_ca_bundle(settings.ca_bundle))
    return replace(
        spec,
        network_name=egress.network,
        dns=(egress.address,),
        env={**spec.env, **egress.env(), **trust_env},
        files={**spec.files, **egress.files(), **trust_files},
    )


def open_run_egress(ctx: RunContext) -> None:
    """With an allow-list (and network on), the sandbox's only way out: pier's egress
    proxy on an internal network. Without one, egress stays as it is."""
    plan, settings = ctx.require_plan(), ctx.settings
    if plan.network_allow is None or not plan.network:
        return
    from pier.egress.inject import live  # the proxy's stack loads only for runs that use it
    from pier.egress.run import open_egress

    ttl = settings.create_timeout_sec + settings.agent_install_timeout_sec + plan.timeout_sec + 3600
    injections = live(plan.injections, plan.env)
    ctx.egress = open_egress(
        ctx.backend,
        settings.egress_network,
        plan.trajectory_id,
        plan.network_allow,
        ttl,
        injections=injections,
        upstream_ca=settings.ca_bundle,
        policy=settings.outbound,
    )
    ctx.redactor.add([ctx.egress.grant.token])
    listed = ", ".join(plan.network_allow) or "nothing"
    ctx.log(f"egress: only through pier's proxy, to {listed} (and the model gateway)")
    for injection in plan.injections:
        given = any(i.placeholder == injection.placeholder for i in injections)
        ctx.log(
            f"secret {injection.name}: the sandbox holds a placeholder; pier's proxy puts the value in "
            f"request headers to {', '.join(injection.hosts)} only"
            if given
            else f"secret {injection.name}: not given to this run, so nothing is put in"
        )
    _egress_warning(ctx)


def _egress_warning(ctx: RunContext) -> None:
    egress = ctx.egress
    if egress is not None and egress.warning:
        _fence_warning(ctx, egress.address, egress.warning)
        egress.warning = None


def _fence_warning(ctx: RunContext, address: str, why: str | None) -> None:
    """Say once per run that the fence around the sandbox is not (all) up."""
    note = f"services on this machine may answer the sandbox at {address}: {why}"
    if why and note not in ctx.record.outputs.warnings:
        ctx.log(f"warning: {note}")
        ctx.record.outputs.warnings.append(note)


def close_run_egress(ctx: RunContext) -> None:
    """End the run's egress grant (idempotent) and say what it refused."""
    egress = ctx.egress
    if egress is None:
        return
    egress.close()
    if egress.grant.injections:
        ctx.log(f"egress put a secret in {egress.grant.injected} request(s)", "save")
    refused = egress.grant.refused
    if refused:
        # Most refused first: what a runbook author most likely needs to add to network.allow.
        hosts = ", ".join(
            f"{host} ({count})" for host, count in sorted(refused.items(), key=lambda i: (-i[1], i[0]))
        )
        ctx.log(
            f"egress refused {refused.total()} request(s) to {len(refused)} host(s) (add to network.allow "
            f"what the run needs): {hosts[:1000]}",
            "save",
        )
    ctx.egress = None


def _labels(ctx: RunContext) -> dict[str, str]:
    plan = ctx.require_plan()
    now = int(time.time())
    settings = ctx.settings
    budget = (
        settings.create_timeout_sec
        + settings.agent_install_timeout_sec
        + plan.timeout_sec
        + settings.kill_grace_sec
    )
    return {
        LABEL_RUN: plan.trajectory_id,
        LABEL_COLLECTION: plan.collection,
        LABEL_CREATED: str(now),
        LABEL_DEADLINE: str(now + budget + settings.sweep_grace_sec),
        LABEL_OWNER: owner_label(),
    }


def _onoff(flag: bool) -> str:
    return "on" if flag else "off"


def setup(ctx: RunContext) -> None:
    """Each step here is a round trip to the engine, so they are few: one archive
    (the folders, the assets, and the agent's files when no install comes between),
    one exec probing every tool the run needs, then the agent's install and, after
    it, its files (credentials are never in the sandbox while an installer runs)."""
    plan, sandbox, agent = ctx.require_plan(), ctx.require_sandbox(), ctx.agent
    assert agent is not None
    installs = type(agent).install is not Agent.install and ctx.agent_layer is None
    if continued(ctx):  # the earlier run's log is in its own outputs; this run's starts empty
        cleared = sandbox.exec(
            "rm -rf /logs/agent/* /logs/agent/.[!.]* 2>/dev/null; true", workdir="/", timeout=60
        )
        if not cleared.ok:
            raise StageError("setup", f"could not clear the earlier run's agent log: {cleared.output[-300:]}")
    launch = None if installs else _launch(ctx)
    _place(ctx, SANDBOX_DIRS, plan.assets, _launch_files(launch))
    _verify_tools(ctx)
    if launch is None:
        began = time.monotonic()
        with metrics.agent_install.labels(plan.agent).time():
            agent.install(sandbox, ctx.log, timeout=ctx.settings.agent_install_timeout_sec)
        if ctx.layer_pending is not None:
            _build_layer_after_install(ctx, time.monotonic() - began)
        launch = _launch(ctx)
        _place(ctx, (), (), _launch_files(launch))
    sources_before_agent(ctx)
    if launch.summary:
        ctx.log(launch.summary)
    ctx.launch = launch


def _launch(ctx: RunContext) -> AgentLaunch:
    """The agent's launch, with the run's way to its model through pier's gateway."""
    plan, agent = ctx.require_plan(), ctx.agent
    assert agent is not None
    ctx.model_route = model_route(ctx)
    if agent.needs_model:  # a model reads its instruction; the script agent runs its blocks
        plan = replace(
            plan, instruction=plan.instruction + deadline_line(plan.timeout_sec, ctx.settings.kill_grace_sec)
        )
    offered = image_mcp_servers(ctx.image_labels)
    if offered:  # what the snapshot offers every agent; the runbook's own servers win by name
        plan = replace(plan, mcp_servers={**offered, **plan.mcp_servers})
    launch = agent.launch(plan, ctx.model_route)
    grant = ctx.model_route.grant if ctx.model_route else None
    if grant is not None:
        ctx.redactor.add([grant.token])
    return launch


DEADLINE_VAR = "PIER_DEADLINE"


def deadline_line(timeout_sec: int, grace_sec: int) -> str:
    """What the agent's instruction ends with: how long it has, and what happens then."""
    minutes = f" ({timeout_sec / 60:.0f} min)" if timeout_sec >= 120 else ""
    stop = (
        f"its processes get SIGTERM, and SIGKILL {grace_sec} s later"
        if grace_sec
        else "its processes are killed"
    )
    return (
        f"\n\n---\npier: this run has {timeout_sec} s{minutes} from its start; the Unix time it ends is in "
        f"${DEADLINE_VAR}. At that time {stop}. Write your outputs to /app/results as you go.\n"
    )


def _launch_files(launch: AgentLaunch | None) -> dict[str, bytes]:
    return {**launch.files, **launch.credential_files} if launch else {}


def _place(ctx: RunContext, dirs: tuple[str, ...], assets: tuple[Path, ...], files: dict[str, bytes]) -> None:
    """One archive into the sandbox's root."""
    if not (dirs or assets or files):
        return
    with tempfile.TemporaryDirectory(dir=ctx.scratch()) as tmp:
        tar = setup_tar(Path(tmp) / "setup.tar", dirs, assets, files, file_mode=0o600)
        # Streamed (never whole in memory) and readable again from the file, so
        # a transient engine error costs a second send, not the run.
        ctx.require_sandbox().put_archive("/", FileTar(tar))
    if assets:
        ctx.log(f"placed {len(assets)} file(s) in /app/assets")


def _verify_tools(ctx: RunContext) -> None:
    """One exec for the tools every sandbox needs and those the checks need; none
    when a sandbox of the same image (on the same backend) was found to have them
    all in the last TOOLS_SEEN_SEC, or any process found them in an image of the
    same content id (kept in PIER_HOME: a `pier run` is a new process each time):
    a fresh sandbox holds exactly its image's files, and they never change under
    the image's id."""
    sandbox = ctx.require_sandbox()
    tools = [*REQUIRED_TOOLS, *(t for t in check_tools(ctx) if t not in REQUIRED_TOOLS)]
    if set(tools) <= _tools_in_process(ctx):
        return
    record = _tools_record(ctx)
    known = _tools_on_disk(record)
    if set(tools) <= known:
        _remember_in_process(ctx, known)
        return
    script = " ".join(f"command -v {tool} >/dev/null || echo {tool};" for tool in tools)
    result = sandbox.exec(["/bin/sh", "-c", script], workdir="/")
    missing = result.output.split()
    basic = [tool for tool in missing if tool in REQUIRED_TOOLS]
    if result.exit_code != 0 or basic or not set(missing) <= set(tools):
        what = ", ".join(basic) or result.output.strip()[-200:]
        raise StageError(
            "setup",
            f"the image {ctx.image} lacks what every sandbox needs ({what}): "
            "use an image with bash and the core utilities (Debian or Ubuntu based)",
            Outcome.invalid,
        )
    refuse_missing_check_tools(ctx, missing)
    # added to what was known of the image: another run's checks may have needed others
    _remember_tools(ctx, record, known | (set(tools) - set(missing)))


# backend -> image -> (tools its sandboxes have, when that was seen)
_TOOLS_SEEN: weakref.WeakKeyDictionary[SandboxBackend, dict[str, tuple[frozenset[str], float]]] = (
    weakref.WeakKeyDictionary()
)
_TOOLS_SEEN_LOCK = threading.Lock()
TOOLS_SEEN_SEC = 60.0  # as long as the Docker backend trusts an image lookup


def _tools_in_process(ctx: RunContext) -> frozenset[str]:
    """What this process saw in the run's image in the last TOOLS_SEEN_SEC."""
    with _TOOLS_SEEN_LOCK:
        seen = _TOOLS_SEEN.get(ctx.backend, {}).get(ctx.image or "")
    if seen is None or time.monotonic() - seen[1] > TOOLS_SEEN_SEC:
        return frozenset()
    return seen[0]


def _tools_on_disk(record: Path | None) -> frozenset[str]:
    """What any process found in the image whose record this is."""
    if record is None:
        return frozenset()
    try:
        return frozenset(json.loads(record.read_text()))
    except (OSError, ValueError, TypeError):
        return frozenset()


def _remember_tools(ctx: RunContext, record: Path | None, present: frozenset[str]) -> None:
    _remember_in_process(ctx, present)
    if record is None:
        return
    try:  # written whole, then renamed: a reader sees the old record or the new one
        make_private_dir(record.parent)
        partial = record.with_name(f".{record.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_text(json.dumps(sorted(present)))
        partial.replace(record)
    except OSError as exc:  # only a probe saved, not the run's business
        log.debug("could not record the tools of %s: %s", ctx.image, exc)


def _remember_in_process(ctx: RunContext, present: frozenset[str]) -> None:
    with _TOOLS_SEEN_LOCK:
        _TOOLS_SEEN.setdefault(ctx.backend, {})[ctx.image or ""] = (present, time.monotonic())


def _tools_record(ctx: RunContext) -> Path | None:
    """The file that holds the tools of the run's image, by its content id."""
    image_id = ctx.backend.image_id(ctx.image) if ctx.image else None
    if not image_id or not re.fullmatch(r"[A-Za-z0-9:]+", image_id):
        return None
    return ctx.settings.tools_seen_dir / f"{image_id.replace(':', '-')}.json"


def run_agent(ctx: RunContext) -> None:
    plan, sandbox, agent, launch = ctx.require_plan(), ctx.require_sandbox(), ctx.agent, ctx.launch
    assert agent is not None and launch is not None
    ctx.log(f"starting agent {plan.agent}")
    tools = ToolCalls(plan.agent)  # timed as the lines arrive: the trace's tool spans

    def on_line(line: str) -> None:
        tools.line(line)
        readable = agent.readable(line)
        if readable is not None:
            ctx.agent_line(readable)

    grant = ctx.model_route.grant if ctx.model_route else None
    grace = ctx.settings.kill_grace_sec
    deadline = int(time.time()) + plan.timeout_sec
    env = {
        **plan.sandbox_env(without_provider_keys(plan.env, grant)),
        **launch.env,
        DEADLINE_VAR: str(deadline),
    }
    try:
        result = sandbox.exec(
            launch.command, env=env, timeout=plan.timeout_sec, on_line=on_line, grace=grace or None
        )
    finally:
        close_model_route(ctx)  # the token dies with the agent
        ctx.say_log_cut()
        ctx.tool_calls = tools.calls()
    ctx.agent_output = result.output
    # the provider's error messages (in the gateway's count) may quote a key: masked like the rest
    usage = ctx.redactor.data(run_usage(agent.usage(result.output), grant.usage() if grant else None))
    if usage:
        usage.setdefault("duration_seconds", round(result.duration_s, 3))
    ctx.record.outputs.usage = usage
    reached = sandbox.limit_reached()  # the agent may have ended before the sandbox was stopped
    if reached:
        raise StageError("run_agent", reached, Outcome.limit_reached)
    if grant is not None and grant.upstream_refused:
        raise StageError(
            "run_agent",
            f"pier's model gateway refused the run's upstream: {grant.upstream_refused}. The operator "
            "names model upstreams in PIER_UPSTREAMS and a collection's own in PIER_COLLECTION_UPSTREAMS",
            Outcome.invalid,
        )
    if grant is not None and grant.refused:
        raise StageError(
            "run_agent",
            f"the run's model budget was used up ({grant.refused}) and the gateway refused the agent's "
            "next request: raise model_budget (or PIER_GATEWAY_MAX_*) or make the runbook do less",
            Outcome.budget_exhausted,
        )
    ctx.provider_trouble = grant.trouble() if grant is not None else None
    failed = _agent_failure(ctx, result)
    if failed is not None:
        message, outcome = failed
        found = trouble_outcome(ctx.provider_trouble)
        if found is not None and outcome in (Outcome.agent_failed, Outcome.timed_out):
            assert ctx.provider_trouble is not None
            raise StageError("run_agent", provider_message(ctx.provider_trouble, message), found)
        raise StageError("run_agent", message, outcome)
    ctx.log(f"agent finished in {result.duration_s:.1f}s")


def _agent_failure(ctx: RunContext, result: ExecResult) -> tuple[str, Outcome] | None:
    """How the agent's command failed (what to say, and the outcome), or None."""
    plan, sandbox = ctx.require_plan(), ctx.require_sandbox()
    if result.timed_out:
        grace = ctx.settings.kill_grace_sec
        kept = f" (SIGTERM, then SIGKILL {grace} s later; what it wrote until then is kept)" if grace else ""
        return (f"the agent timed out after {plan.timeout_sec} seconds and was stopped{kept}: raise timeout_sec "
                f"(at most {ctx.settings.max_timeout_sec}) or have the runbook write its outputs as it goes",
                Outcome.timed_out)  # fmt: skip
    if result.exit_code == 0:
        return None
    if sandbox.oom_killed():
        return (f"the agent ran out of memory (limit {plan.memory}) and was killed (OOM): "
                "raise `memory` on the task's step or make the work use less", Outcome.limit_reached)  # fmt: skip
    return (f"the agent exited with code {result.exit_code}: see the agent log (`pier logs "
            f"{plan.trajectory_id}`) for the failing step", Outcome.agent_failed)  # fmt: skip


def model_route(ctx: RunContext) -> ModelRoute | None:
    """The run's route through pier's model gateway, or None when the agent needs
    no model or the gateway is off (PIER_GATEWAY=false: keys enter the sandbox)."""
    settings, agent, plan = ctx.settings, ctx.agent, ctx.require_plan()
    if not settings.gateway or agent is None or not agent.needs_model:
        return None
    host = ctx.egress.address if ctx.egress else settings.gateway_host or ctx.backend.host_address()
    if not host:
        raise StageError(
            "setup",
            f"the {ctx.backend.name} backend has no address where sandboxes reach pier's model gateway: "
            "set PIER_GATEWAY_HOST (or PIER_GATEWAY=false to give the agent the provider key itself)",
        )
    from pier.gateway.server import shared_gateway  # the HTTP server loads only for runs that use it

    gateway = shared_gateway(host, settings.gateway_port, settings.ca_bundle, settings.outbound)
    if ctx.egress is not None:
        ctx.egress.admit_port(gateway.port)
        _egress_warning(ctx)
    elif plan.network:
        _fence_warning(ctx, host, ctx.backend.admit(host, gateway.port))
    ttl = plan.timeout_sec + settings.kill_grace_sec + settings.cleanup_timeout_sec + settings.sweep_grace_sec
    return ModelRoute(gateway, plan.trajectory_id, plan.model_budget, ttl_s=ttl)


def close_model_route(ctx: RunContext) -> None:
    """End the run's gateway token (idempotent): nothing can use it afterwards."""
    if ctx.model_route is not None:
        ctx.model_route.close()


def cleanup_credentials(ctx: RunContext) -> None:
    plan, sandbox = ctx.require_plan(), ctx.require_sandbox()
    files = list(ctx.launch.credential_files) if ctx.launch else []
    if ctx.launch and ctx.launch.collect_command:
        # The CLI's session files often live beside its config: save them first.
        sandbox.exec(ctx.launch.collect_command, workdir="/", timeout=ctx.settings.cleanup_timeout_sec)
    keep = wants_keep(ctx)
    if not files and not plan.checks and not keep:
        # Nothing secret was written and the sandbox is deleted right after collect:
        # an exec here would only cost a round trip.
        ctx.record.stage("cleanup_credentials").detail = "no credential files; no checks follow"
        return
    paths = " ".join(shlex.quote(p) for p in [*files, "/run/pier"])
    result = sandbox.exec(f"rm -rf -- {paths}", workdir="/", timeout=ctx.settings.cleanup_timeout_sec)
    if not result.ok:
        raise StageError("cleanup_credentials", f"could not delete credential files: {result.output[-300:]}")
    if files:
        ctx.log(f"deleted {len(files)} credential file(s)")
    if plan.checks or keep:  # a kept sandbox runs nothing between runs: no process holds a secret
        stopped = sandbox.exec(STOP_PROCESSES_SCRIPT, workdir="/", timeout=ctx.settings.cleanup_timeout_sec)
        if not stopped.ok:
            raise StageError(
                "cleanup_credentials",
                f"could not stop what the agent left running, so checks would not be reliable: "
                f"{stopped.output.strip()[-300:]}",
            )
        ctx.log(f"stopped what the agent left running{_count(stopped.output)}")


def _count(output: str) -> str:
    last = output.strip().splitlines()[-1:] or [""]
    return f" ({last[0]} process(es))" if last[0].isdigit() else ""


def collect(ctx: RunContext) -> None:
    try:
        collect_outputs(ctx, before_reading=lambda found: check_room(ctx, found.bytes))
    except StageError as exc:
        found = trouble_outcome(ctx.provider_trouble)
        if exc.outcome != Outcome.no_results or found is None or ctx.provider_trouble is None:
            raise
        # the agent gave up quietly after its provider refused it: that is the verdict
        raise StageError("collect", provider_message(ctx.provider_trouble, exc.message), found) from None
    except OSError as exc:
        if no_space(exc):
            shutil.rmtree(ctx.output_dir, ignore_errors=True)  # what was half copied: the disk needs the room
            raise full_scratch(ctx) from None
        raise
    record_eval(ctx)


def check(ctx: RunContext) -> None:
    check_stage(ctx, fresh_spec=lambda: sandbox_spec(ctx))


def save(ctx: RunContext) -> None:
    save_outputs(ctx)
    where = ctx.storage.where(ctx.record.storage_path) if ctx.storage else ctx.output_dir
    ctx.log(f"outputs saved in {where}")
