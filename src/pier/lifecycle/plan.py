"""The one place a run's plan is built: a task and a run's init_params, resolved
once into a frozen RunPlan with its agent, or refused with InputError. prepare,
preflight (the CLI and the API, before they accept a run) and the checks on a
task that is stored all come here. Nothing after prepare reads raw params."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pier.agents import Agent, get_agent
from pier.checks import Check, check_isolation, load_checks
from pier.checks.model import CodeCheck
from pier.checks.sources import check_destination
from pier.egress.allow import allow_list, refuse_disallowed
from pier.egress.inject import Injection, declared_injections
from pier.errors import InputError
from pier.gateway.grants import Budget
from pier.lifecycle.assets import AssetLimits, check_assets
from pier.limits import OperatorLimits, run_limits
from pier.outbound import OutboundPolicy
from pier.runbook.parse import parse
from pier.runbook.render import render, variables
from pier.sandbox.source import check_registries
from pier.settings import Settings
from pier.tasks.build import infer_agent, task_from_runbook
from pier.tasks.model import Task
from pier.tasks.resolve import ResolvedStep, resolve

# Resolves an init_params file path (an upload path or, for the CLI, a host path).
FileResolver = Callable[[str], Path]


@dataclass(frozen=True)
class RunPlan:
    trajectory_id: str
    collection: str
    task: str
    agent: str
    model: str | None
    model_provider: str | None
    instruction: str  # the rendered runbook body: the agent's instruction
    snapshot: str | None
    image: str | None
    base_image: str | None
    apt_packages: tuple[str, ...]
    pip_packages: tuple[str, ...]
    cpus: float
    memory: str
    timeout_sec: int
    network: bool
    assets: tuple[Path, ...]
    checks: tuple[Check, ...]
    checks_isolation: str  # same | fresh
    primary_outputs: tuple[str, ...]
    mcp_servers: Mapping[str, Any]
    secret_decls: Mapping[str, Any]
    env: Mapping[str, str]  # secrets and collection environment; never logged
    vars: Mapping[str, str]
    warnings: tuple[str, ...] = field(default=())
    model_budget: Budget = field(default_factory=Budget)  # the gateway refuses requests past it
    # Names the sandbox may reach through pier's egress proxy; None: no allow-list.
    network_allow: tuple[str, ...] | None = None
    # Secrets the egress proxy puts in (`inject`): the sandbox gets their placeholders.
    injections: tuple[Injection, ...] = ()
    # Variables holding a key the operator holds (trial keys): for the gateway only.
    operator_keys: frozenset[str] = frozenset()

    @property
    def secret_values(self) -> tuple[str, ...]:
        return tuple(self.env.values())

    def sandbox_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """env as the sandbox gets it: an injected secret's variable holds its
        placeholder, never the value; an operator's key is not there at all."""
        kept = {name: value for name, value in env.items() if name not in self.operator_keys}
        return {**kept, **{i.variable: i.placeholder for i in self.injections if i.variable in kept}}


@dataclass(frozen=True)
class RunInputs:
    """What a caller hands to prepare besides the task."""

    trajectory_id: str
    collection: str
    task: str
    env: Mapping[str, str] = field(default_factory=dict)
    resolve_file: FileResolver | None = None
    # Where relative local check sources are found (the runbook's folder). None
    # refuses local sources: a server must not read its own disk for a caller.
    source_dir: Path | None = None
    # Variables of env that hold a key the server holds for its users (trial keys).
    operator_keys: frozenset[str] = frozenset()


def plan_run(
    task: Task, run_params: Mapping[str, Any], inputs: RunInputs, settings: Settings
) -> tuple[ResolvedStep, RunPlan, Agent]:
    """Everything prepare decides, without side effects; raises InputError on bad
    input. The API and CLI call it too (preflight), to refuse a run before accepting it."""
    step = resolve(task, dict(run_params))
    plan = build_plan(step, inputs, settings)
    agent = get_agent(plan.agent)
    require_secrets(plan)
    agent.preflight(plan)
    refuse_exposed_keys(plan, agent, settings.gateway)
    return step, plan, agent


def refuse_exposed_keys(plan: RunPlan, agent: Agent, gateway: bool) -> None:
    """An operator's key (a trial key) reaches pier's model gateway and nothing
    else: InputError naming the variable when the run would place it in its
    sandbox, as a runbook secret (an env var, {{secrets.X}}) or with an agent that
    holds its key itself (the script agent, or any agent with PIER_GATEWAY=false)."""
    if not plan.operator_keys:
        return
    for name, decl in plan.secret_decls.items():
        variable = secret_variable(name, decl)
        if variable in plan.operator_keys:
            raise InputError(
                f"secrets.{name}: {variable} would be this server's trial key, which never enters a "
                f"sandbox (only pier's model gateway uses it): set your own {variable} in the "
                "collection's environment or send it in secret_params"
            )
    if not (gateway and agent.needs_model):
        variable = sorted(plan.operator_keys)[0]
        why = "PIER_GATEWAY is off" if not gateway else f"the {plan.agent} agent calls no model through it"
        raise InputError(
            f"{variable}: a trial key reaches only pier's model gateway, and {why}: set your own "
            f"{variable} in the collection's environment to run without the gateway"
        )


def checked_task(task: Task, limits: OperatorLimits | None = None) -> Task:
    """task, if it can be run: its runbook parses, names an agent pier has and,
    given the operator's limits, asks for no more than they allow. InputError
    (TaskError, RunbookError, LimitError) naming what is wrong, so that a bad task
    is refused when it is stored (API PUT, `pier task push`), not when it is run."""
    step = resolve(task, {})
    get_agent(step.agent or infer_agent(step.model))
    if limits is not None:
        run_limits(step.cpus, step.memory, step.timeout_sec, limits, step.asked_limits)
    return task


def task_from_json(data: Any, limits: OperatorLimits | None = None) -> Task:
    """A stored task's definition, checked; pydantic ValidationError names the bad
    field, InputError the rest."""
    return checked_task(Task.model_validate(data), limits)


def task_from_text(
    text: str, default_snapshot: str | None, name: str = "runbook", limits: OperatorLimits | None = None
) -> Task:
    """A runbook's text as a checked task."""
    return checked_task(task_from_runbook(parse(text, path=name), default_snapshot), limits)


def build_plan(step: ResolvedStep, inputs: RunInputs, settings: Settings) -> RunPlan:
    env = dict(inputs.env)
    vars_ = {key: str(value) for key, value in step.vars.items()}
    injections = declared_injections(step.secrets, secret_variable)
    secret_env = _secret_values(step.secrets, env)
    secret_env.update({i.name: i.placeholder for i in injections if i.name in secret_env})
    rendered = render(step.body, variables(vars_, secret_env))
    network = True if step.network_enabled is None else step.network_enabled
    limits = run_limits(step.cpus, step.memory, step.timeout_sec, settings, step.asked_limits)
    checks = load_checks(step.checks, inputs.source_dir)
    check_destinations(step.image, step.base_image, checks, network, settings.outbound)
    # A secret's `inject.hosts` join the allow-list: judged like its entries.
    refuse_disallowed([h for i in injections for h in i.hosts], settings.outbound, "secrets.inject.hosts")
    warnings = list(step.warnings)
    warnings += [f"unfilled variable {{{{{name}}}}} left as written" for name in rendered.unfilled]
    return RunPlan(
        trajectory_id=inputs.trajectory_id,
        collection=inputs.collection,
        task=inputs.task,
        agent=step.agent or infer_agent(step.model) or "",
        model=step.model,
        model_provider=step.model_provider,
        instruction=rendered.text,
        snapshot=step.snapshot or None,
        image=step.image,
        base_image=step.base_image,
        apt_packages=step.apt_packages,
        pip_packages=step.pip_packages,
        cpus=limits.cpus,
        memory=limits.memory,
        timeout_sec=limits.timeout_sec,
        network=network,
        assets=check_assets(_files(step.file_paths, inputs.resolve_file), AssetLimits.of(settings)),
        checks=checks,
        checks_isolation=check_isolation(step.checks_isolation),
        primary_outputs=tuple(_primary(step.primary_outputs)),
        mcp_servers=step.mcp_servers,
        secret_decls=step.secrets,
        env=env,
        vars=vars_,
        warnings=tuple(warnings),
        model_budget=model_budget(step.model_budget, settings),
        network_allow=_with_secret_hosts(network_allow(step.network, settings), injections, network),
        injections=injections,
        operator_keys=inputs.operator_keys,
    )


def check_destinations(
    image: str | None,
    base_image: str | None,
    checks: tuple[Check, ...],
    network: bool,
    policy: OutboundPolicy,
) -> None:
    """Refuse now (OutboundRefused, a 422 naming the field) what would make pier
    or its engine connect to a destination the outbound policy refuses: an image's
    registry, a check source the host clones."""
    check_registries(policy, {"image": image, "base_image": base_image})
    for check in checks:
        if isinstance(check, CodeCheck):
            check_destination(check, policy, network)


def _with_secret_hosts(
    allow: tuple[str, ...] | None, injections: tuple[Injection, ...], network: bool
) -> tuple[str, ...] | None:
    """The allow-list with the injected secrets' hosts added. A secret can only be
    put in by the egress proxy, so it needs the run to be allow-listed (the proxy
    its only way out): without a list, InputError says how to ask for one."""
    if not injections or not network:
        return allow
    if allow is None:
        name = injections[0].name
        raise InputError(
            f"secrets.{name}.inject: pier puts a secret in through its egress proxy, which needs egress "
            "by allow-list: add `network: {allow: []}` to the runbook (the secret's hosts are added to it) "
            "or set PIER_NETWORK_ALLOW"
        )
    return tuple(dict.fromkeys([*allow, *(host for i in injections for host in i.hosts)]))


def model_budget(asked: Mapping[str, Any], settings: Settings) -> Budget:
    """The run's model budget: its own `model_budget` keys over the operator's
    PIER_GATEWAY_MAX_* defaults. Raises InputError naming a bad field."""
    defaults = {"requests": settings.gateway_max_requests, "tokens": settings.gateway_max_tokens,
                "cost_usd": settings.gateway_max_cost_usd}  # fmt: skip
    try:
        return Budget.model_validate({**defaults, **asked})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(
            f"model_budget.{where}: {first['msg']} (model_budget takes requests, tokens and cost_usd)"
        ) from None


class NetworkPolicy(BaseModel):
    """The `network` key: `{allow: [...]}`."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list, description="host names, *.suffix, IPs, with :port")


def network_allow(asked: Mapping[str, Any] | None, settings: Settings) -> tuple[str, ...] | None:
    """The run's allow-list: the operator's PIER_NETWORK_ALLOW entries plus the run's
    own `network.allow`; None when neither asks for one (egress unrestricted).
    Raises InputError naming a bad entry or key."""
    defaults = [e.strip() for e in settings.network_allow.split(",") if e.strip()]
    if asked is None and not defaults:
        return None
    try:
        policy = NetworkPolicy.model_validate(asked or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"network.{where}: {first['msg']} (network takes allow: [host names])") from None
    entries = tuple(dict.fromkeys([*defaults, *policy.allow]))
    allow_list(entries)  # refuses a bad entry now, before any sandbox exists
    refuse_disallowed(entries, settings.outbound)
    return entries


def secret_variable(name: str, decl: Mapping[str, Any] | None) -> str:
    """The environment variable behind a runbook secret: its `env`, else its name."""
    return (decl or {}).get("env") or name


def require_secrets(plan: RunPlan) -> None:
    """Raises InputError naming a `required: true` secret the run was not given."""
    for name, decl in plan.secret_decls.items():
        key = secret_variable(name, decl)
        if (decl or {}).get("required") and not plan.env.get(key):
            raise InputError(
                f"the runbook's secret {name} is required: set {key} in the environment pier runs in "
                "(or the collection's environment)"
            )


def _secret_values(decls: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """{{secrets.NAME}} values: the declared env variable's value, when provided."""
    variables = {name: secret_variable(name, decl) for name, decl in decls.items()}
    return {name: env[key] for name, key in variables.items() if key in env}


def _files(paths: tuple[str, ...], resolve_file: FileResolver | None) -> list[Path]:
    if resolve_file is None:
        return [Path(os.path.expanduser(p)) for p in paths]
    return [resolve_file(p) for p in paths]


def _primary(outputs: tuple[str, ...]) -> list[str]:
    cleaned = []
    for output in outputs:
        path = re.sub(r"^(\./|/app/results/)", "", str(output)).strip("/")
        if not path or ".." in Path(path).parts:
            raise InputError(f"primary_outputs entry '{output}' must be a path inside the results folder")
        cleaned.append(path)
    return cleaned
