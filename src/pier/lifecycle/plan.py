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

from pier.agents import Agent, agent_env_names, get_agent, known_agents
from pier.agents.providers import AGENT_PROVIDERS, setting_names
from pier.agents.upstreams import Upstreams
from pier.checks import Check, check_isolation
from pier.checks.model import CodeCheck
from pier.checks.platform import CodeChecksConfig, code_checks_config, lenient_config
from pier.checks.sources import check_destination
from pier.egress.allow import allow_list, refuse_disallowed
from pier.egress.inject import Injection, declared_injections
from pier.errors import InputError, Problems
from pier.gateway.grants import Budget
from pier.lifecycle.assets import AssetLimits, check_assets
from pier.lifecycle.evaluation import Exposure, agent_note, consumed_by_servers, exposure, plan_checks
from pier.limits import run_limits
from pier.names import trajectory_id_of
from pier.outbound import OutboundPolicy
from pier.runbook.parse import parse
from pier.runbook.render import BUILTIN_VARS, Rendered, line_of, placeholders, render, variables
from pier.sandbox.dockerfile import check_build_inputs, check_image_ref
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
    keep_sandbox: bool = False  # the sandbox outlives the run, for PIER_KEEP_TTL_SEC
    continue_from: str | None = None  # the run whose kept sandbox this run runs in
    # The collection's named volumes the sandbox mounts: (name, path, read_only), docs/sessions.md#volumes
    volumes: tuple[tuple[str, str, bool], ...] = ()
    # The platform's evaluation (docs/runbook-format.md): `code_checks:`, strict_evaluation,
    # `evaluation:` (programmatic | rubric), and the secrets withheld from the agent
    # and given to the checks pier runs.
    # Where model calls may go: the operator's upstreams, and the collection's own if allowed.
    upstreams: Upstreams = field(default_factory=Upstreams)
    code_checks: CodeChecksConfig = field(default_factory=CodeChecksConfig)
    strict_evaluation: bool = False
    evaluation: str | None = None
    exposure: Exposure = field(default_factory=lambda: Exposure(frozenset(), frozenset(), {}))
    check_lines: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def check_env(self) -> dict[str, str]:
        """The secrets the checks pier runs receive: the agent's, and those exposed to checks."""
        return {name: self.env[name] for name in sorted(self.exposure.to_checks) if name in self.env}

    @property
    def secret_values(self) -> tuple[str, ...]:
        return tuple(self.env.values())

    def sandbox_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """env as the sandbox gets it: an injected secret's variable holds its
        placeholder, never the value; an operator's key is not there at all."""
        hidden = self.operator_keys | self.exposure.withheld
        kept = {name: value for name, value in env.items() if name not in hidden}
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
    agent_name = step.agent or infer_agent(step.model)
    problems: list[InputError] = []
    try:
        agent: Agent | None = get_agent(agent_name)
    except InputError as exc:
        agent = None
        problems.append(_not_a_runbook(step) if not agent_name and not _has_frontmatter(step) else
                        exc.at("agent" if agent_name else None))  # fmt: skip
    try:
        plan: RunPlan | None = build_plan(step, inputs, settings)
    except Problems as exc:
        plan = None
        problems += exc.problems
    except InputError as exc:
        plan = None
        problems.append(exc)
    if plan is not None:
        checks: list[Callable[[RunPlan], None]] = [require_secrets, *([agent.preflight] if agent else [])]
        if agent is not None:
            checks.append(lambda p: refuse_exposed_keys(p, agent, settings.gateway))
        for check in checks:
            try:
                check(plan)
            except InputError as exc:
                problems.append(exc)
    Problems.raise_any(problems)
    assert plan is not None and agent is not None  # no problems: both were made
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


def _has_frontmatter(step: ResolvedStep) -> bool:
    """Whether the runbook's frontmatter sets anything (none at all, or an empty one: no)."""
    return bool(step.frontmatter.model_fields_set)


def _not_a_runbook(step: ResolvedStep) -> InputError:
    """A file with no frontmatter at all, and no agent given: most likely not a
    runbook (a README, notes), which "names no agent" would not tell."""
    return InputError(
        "this file has no frontmatter (the `---` block at the top of a RUNBOOK.md that names its agent), "
        "so it is probably not a runbook: check the path; if it is one, start it with `---`, "
        f"`agent: NAME` (one of {', '.join(known_agents())}) and `---` (docs/runbook-format.md), "
        "or give the agent (pier run --agent NAME, init_params.agent)"
    )


def checked_task(task: Task, settings: Settings) -> Task:
    """task, if a run of it could start: the same plan a run makes, as a server
    would make it (no local check sources, no host files), with the variables,
    keys and files a run brings left open. InputError (Problems, TaskError,
    RunbookError) naming what is wrong, so that a bad task is refused when it is
    stored (API PUT, `pier task push`), not when it is run. A workflow's steps
    were checked when the Task was made (pier.tasks.workflow.check_workflow)."""
    if task.is_workflow:
        return task
    step = resolve(task, {})
    agent = step.agent or infer_agent(step.model)
    keys = {secret_variable(name, decl) for name, decl in step.secrets.items()} | set(agent_env_names(agent))
    keys -= setting_names()  # endpoints and the region: a placeholder is none
    inputs = RunInputs("stored-task-check", "check", "task", env=dict.fromkeys(keys, "placeholder"))
    plan_run(task, {"allow_unfilled_vars": True, "file_paths": []}, inputs, settings)
    return task


def check_sandbox_inputs(step: ResolvedStep) -> None:
    """What the step gives for its sandbox's image follows the build grammar
    (pier.sandbox.dockerfile), whichever source the run ends up using: one rule
    for validate, the API and the CLI. Raises InputError naming the value."""
    if step.image:
        check_image_ref("image", step.image)
    check_build_inputs(step.base_image, step.apt_packages, step.pip_packages)


def task_from_json(data: Any, settings: Settings) -> Task:
    """A stored task's definition, checked; pydantic ValidationError names the bad
    field, InputError the rest."""
    return checked_task(Task.model_validate(data), settings)


def task_from_text(text: str, settings: Settings, name: str = "runbook") -> Task:
    """A runbook's text as a checked task."""
    return checked_task(task_from_runbook(parse(text, path=name), settings.default_snapshot), settings)


def build_plan(step: ResolvedStep, inputs: RunInputs, settings: Settings) -> RunPlan:
    """The run's plan; Problems (an InputError) listing every independent problem
    found, so that one round fixes them all."""
    problems: list[InputError] = []

    def checked(compute: Callable[[], Any], fallback: Any, key: str | None = None) -> Any:
        try:
            return compute()
        except Problems as exc:
            problems.extend(problem.at(key) for problem in exc.problems)
            return fallback
        except InputError as exc:
            problems.append(exc.at(key))
            return fallback

    env = dict(inputs.env)
    vars_ = {key: str(value) for key, value in step.vars.items() if value is not None}
    injections = checked(lambda: declared_injections(step.secrets, secret_variable), (), "secrets")
    secret_env = _secret_values(step.secrets, env)
    secret_env.update({i.name: i.placeholder for i in injections if i.name in secret_env})
    config = checked(lambda: code_checks_config(step.code_checks), lenient_config(step.code_checks), None)
    mcp_servers = {**config.mcp_servers, **step.mcp_servers}
    exposed = checked(
        lambda: exposure(step.secrets, config, mcp_servers, secret_variable),
        Exposure(frozenset(), frozenset(), {}),
    )
    to_agent = {
        k: v for k, v in secret_env.items() if secret_variable(k, step.secrets.get(k)) not in exposed.withheld
    }
    to_checks = {
        k: v for k, v in secret_env.items() if secret_variable(k, step.secrets.get(k)) in exposed.to_checks
    }
    rendered = render(step.body, variables(vars_, to_agent))
    warnings = list(step.warnings)
    warnings += checked(lambda: vars_rules(step, rendered, settings), [])
    model, provider = step.model, step.model_provider
    if provider and provider not in AGENT_PROVIDERS:
        warnings.append(_foreign_provider(step))
        model, provider = None, None
    checked(lambda: check_sandbox_inputs(step), None)
    network = True if step.network_enabled is None else step.network_enabled
    limits = checked(
        lambda: run_limits(step.cpus, step.memory, step.timeout_sec, settings, step.asked_limits), None
    )
    assets = checked(lambda: check_assets(_files(step.file_paths, inputs.resolve_file),
                                          AssetLimits.of(settings)), ())  # fmt: skip
    planned = checked(
        lambda: plan_checks(step.checks, config, step.body, variables(vars_, to_checks), inputs.source_dir),
        None,
    )
    checks = planned.checks if planned else ()
    warnings += planned.warnings if planned else ()
    checked(lambda: check_destinations(step.image, step.base_image, checks, network, settings.outbound), None)
    checked(lambda: check_sources(config, settings.outbound), None, "code_checks.sources")
    # A secret's `inject.hosts` join the allow-list: judged like its entries.
    checked(
        lambda: refuse_disallowed(
            [h for i in injections for h in i.hosts], settings.outbound, "secrets.inject.hosts"
        ),
        None,
    )
    isolation = checked(lambda: check_isolation(step.checks_isolation), "same", "checks_isolation")
    primary = checked(lambda: tuple(_primary(step.primary_outputs)), (), "primary_outputs")
    budget = checked(lambda: model_budget(step.model_budget, settings), Budget(), "model_budget")
    upstreams = checked(lambda: Upstreams.of(settings, inputs.collection), Upstreams())
    allow = checked(
        lambda: _with_secret_hosts(network_allow(step.network, settings), injections, network),
        None,
        "network",
    )
    keep = checked(lambda: _keep_sandbox(step.keep_sandbox), False, "keep_sandbox")
    parent = checked(lambda: _continue_from(step.continue_from, allow), None, "continue_from")
    volumes = tuple((name, v.path, v.read_only) for name, v in step.frontmatter.volumes.items())
    if volumes and parent is not None:
        problems.append(
            InputError(
                "continue_from with `volumes:` is not supported: a kept sandbox keeps the volumes it was "
                "made with; drop `volumes:` from the follow-up runbook"
            ).at("volumes")
        )
    Problems.raise_any(problems)
    return RunPlan(
        trajectory_id=inputs.trajectory_id,
        collection=inputs.collection,
        task=inputs.task,
        agent=step.agent or infer_agent(step.model) or "",
        model=model,
        model_provider=provider,
        instruction=rendered.text + agent_note(checks, config.references),
        snapshot=step.snapshot or None,
        image=step.image,
        base_image=step.base_image,
        apt_packages=step.apt_packages,
        pip_packages=step.pip_packages,
        cpus=limits.cpus,
        memory=limits.memory,
        timeout_sec=limits.timeout_sec,
        network=network,
        assets=assets,
        checks=checks,
        checks_isolation=isolation,
        primary_outputs=primary,
        mcp_servers=consumed_by_servers(mcp_servers, step.secrets, env, secret_variable),
        secret_decls=step.secrets,
        env=env,
        vars=vars_,
        warnings=tuple(warnings),
        model_budget=budget,
        network_allow=allow,
        injections=injections,
        operator_keys=inputs.operator_keys,
        keep_sandbox=keep,
        continue_from=parent,
        volumes=volumes,
        upstreams=upstreams,
        code_checks=config,
        strict_evaluation=step.strict_evaluation,
        evaluation=step.frontmatter.evaluation,
        exposure=exposed,
        check_lines=planned.lines if planned else {},
    )


TRAJECTORY_ID = re.compile(r"[0-9a-f]{32}")


def _keep_sandbox(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"keep_sandbox must be true or false, got {value!r}")
    return value


def _continue_from(value: Any, allow: tuple[str, ...] | None) -> str | None:
    """The run whose kept sandbox this one runs in: a trajectory id."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = trajectory_id_of(value.strip())  # a workflow id names the same run
    if not isinstance(value, str) or not TRAJECTORY_ID.fullmatch(value):
        raise InputError(
            f"continue_from must be the trajectory id of a run whose sandbox was kept "
            f"(32 hex characters), got {value!r}"
        )
    if allow is not None:
        raise InputError(
            "continue_from with a network allow-list is not supported: a kept sandbox keeps the network "
            "it was made with; drop `network.allow` from the follow-up runbook"
        )
    return value


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


def check_sources(config: CodeChecksConfig, policy: OutboundPolicy) -> None:
    """A `code_checks.sources` URL pier would clone from a refused address: OutboundRefused now."""
    for source in config.sources:
        stand_in = CodeCheck(name=source.name, type="code", source=source.url, run="true")
        check_destination(stand_in, policy, network=False)


def _foreign_provider(step: ResolvedStep) -> str:
    """A model_provider pier runs no agent on (`replicate`): the runbook names the
    model its own tools call, not the agent's. The run goes on with the agent's
    own provider choice and model; the runbook's two keys stay in its text."""
    return (
        f"model_provider '{step.model_provider}' is not a provider pier runs agents on "
        f"({', '.join(AGENT_PROVIDERS)}): the agent runs on its own provider and default model, and the "
        f"runbook's model '{step.model}' and model_provider '{step.model_provider}' are left to the "
        "runbook's own tools (if you meant one of pier's providers, fix the name)"
    )


def _allowed(step: ResolvedStep, param: str, default: bool) -> bool:
    value = step.init_params.get(param)
    return default if value is None else bool(value)


def vars_rules(step: ResolvedStep, rendered: Rendered, settings: Settings) -> list[str]:
    """The rules for a run's variables; the warnings they leave, or Problems.

    - Every `--var`/`vars` key the run gives must be a variable of the runbook: a
      key of its frontmatter `vars:` when it has that block, else a `{{name}}` its
      body uses. Extra keys pass with `allow_extra_vars` (PIER_ALLOW_EXTRA_VARS).
    - A runbook with a `vars:` block declares its variables: a `{{name}}` it does
      not declare is an error (a typo, most often), and a declared variable with
      no value (`name:` or `name: null`, no default) must be given, unless the
      run allows it (`allow_unfilled_vars`, PIER_ALLOW_UNFILLED_VARS): then it is
      left as written. A default makes a variable optional.
    - A runbook without a `vars:` block (the platform's own format) has optional
      placeholders: an unfilled one is left as written, with a warning.
    """
    front = step.frontmatter
    declared = "vars" in front.model_fields_set
    own = list(front.vars) if declared else placeholders(step.body)
    problems: list[InputError] = []
    warnings: list[str] = []
    extra = [key for key in step.vars if key not in own and key not in BUILTIN_VARS]
    if extra and not _allowed(step, "allow_extra_vars", settings.allow_extra_vars):
        names = ", ".join(own) or "none"
        problems += [
            InputError(
                f"vars.{key}: this runbook has no variable '{key}' (its variables: {names}); fix the name, "
                "or allow extra variables (pier run --allow-extra-vars, init_params.allow_extra_vars: true, "
                "or PIER_ALLOW_EXTRA_VARS=true)"
            ).at("vars")
            for key in extra
        ]
    allow_unfilled = _allowed(step, "allow_unfilled_vars", settings.allow_unfilled_vars)
    for name in rendered.unfilled:
        if name.startswith("secrets."):
            warnings.append(f"{{{{{name}}}}} has no value (its variable is not set): left as written")
            continue
        line = _body_line(step, name)
        if not declared:
            warnings.append(
                f"unfilled variable {{{{{name}}}}} left as written (the runbook declares no vars:, so its "
                f"placeholders are optional; give it with --var {name}=VALUE)"
            )
        elif name not in front.vars:
            declared_names = ", ".join(front.vars) or "none"
            problems.append(
                InputError(
                    f"{{{{{name}}}}} is not one of the runbook's variables ({declared_names}): declare it "
                    f"in vars: (with a default to make it optional) or fix the name"
                ).at(line=line)
            )
        elif allow_unfilled:
            warnings.append(
                f"variable {{{{{name}}}}} has no value: left as written (unfilled variables allowed; "
                f"otherwise a run must give it: --var {name}=VALUE)"
            )
        else:
            problems.append(
                InputError(
                    f"variable {{{{{name}}}}} has no value: give it (pier run --var {name}=VALUE, or "
                    f"init_params.vars.{name}), give it a default in vars:, or allow unfilled variables "
                    "(pier run --allow-unfilled-vars, init_params.allow_unfilled_vars: true, "
                    "PIER_ALLOW_UNFILLED_VARS=true)"
                ).at(f"vars.{name}")
            )
    Problems.raise_any(problems)
    return warnings


def _body_line(step: ResolvedStep, name: str) -> int | None:
    """The line of the runbook file where `{{name}}` is first used."""
    line = line_of(step.body, name)
    if line is None:
        return None
    return line + step.instruction.count("\n", 0, len(step.instruction) - len(step.body))


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
