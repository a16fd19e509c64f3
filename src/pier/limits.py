"""What a run may ask for: CPUs, memory and time.

One set of rules wherever a limit comes in (runbook frontmatter, a task's
step_configs, init_params, CLI options, API bodies). The field checks
(`check_cpus`, `check_memory`, `check_timeout`) need nothing and back the
pydantic models; `run_limits` is the one function that prepare (so the fleet's
workers), preflight (`pier run`, the API, routines) and `pier validate` all go
through, and its precedence is one rule:

1. the task's limit (its step_configs, else its runbook's frontmatter; `pier run`
   flags set the task's) is the ceiling;
2. a run's init_params may ask for less, never for more (refused, naming the
   field: a caller of a stored task, a collection token or a routine, may trade
   time for quicker feedback but not spend more than the task's author planned);
3. whatever results is held to the operator's maxima (PIER_MAX_CPUS,
   PIER_MAX_MEMORY, PIER_MAX_TIMEOUT_SEC), the machine's limits: more is refused,
   never lowered silently, so a run never gets less than its author asked for.

Why a floor on memory: Docker reads 0 as "no limit" and refuses less than
6 MiB with a raw engine error; below MIN_MEMORY a shell and the core tools that
every sandbox runs (bash, timeout, the exec wrapper) do not reliably start.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from pier.errors import InputError

MIN_MEMORY = "32M"
MIN_CPUS = 0.01  # the engine's own step: Docker refuses less
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?")
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class LimitError(InputError):
    """A limit a run may not have; `field` names it (cpus, memory, timeout_sec)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def parse_size(size: str | int) -> int:
    """Bytes in a size such as "8G", "512m", "1.5GiB" or 1048576 (binary units,
    as Docker reads them). Raises InputError."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    match = _SIZE.fullmatch(str(size).strip().lower()) if isinstance(size, str) else None
    if not match:
        raise InputError(f"memory/disk size {size!r} is not a size (expected e.g. 8G or 512M)")
    return int(float(match[1]) * _UNIT[match[2]])


def check_cpus(value: Any) -> float:
    """CPUs as a number of at least MIN_CPUS. Raises ValueError saying what to write."""
    wrong = ValueError(f"{value!r} is not a number of CPUs: write it like 2 or 0.5 (at least {MIN_CPUS})")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise wrong
    try:
        cpus = float(value)
    except ValueError:
        raise wrong from None
    if not math.isfinite(cpus) or cpus < MIN_CPUS:
        raise wrong
    return cpus


def check_memory(value: Any) -> str:
    """A memory size of at least MIN_MEMORY, as text ("8G"; a bare number is bytes).
    Raises ValueError saying what to write."""
    wrong = ValueError(f"{value!r} is not a memory size: write it like 512M, 8G or 16G")
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise wrong
    try:
        size = parse_size(value)
    except InputError:
        raise wrong from None
    if size < parse_size(MIN_MEMORY):
        raise ValueError(
            f"{value!r} is less than a sandbox can run in: ask for at least {MIN_MEMORY} "
            "(0 would mean no limit at all, which a run may not ask for)"
        )
    return str(value).strip()


def check_timeout(value: Any) -> int:
    """A time limit in whole seconds, at least 1. Raises ValueError saying what to write."""
    wrong = ValueError(f"{value!r} is not a time limit: write a whole number of seconds, at least 1")
    if isinstance(value, bool):
        raise wrong
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < 1:
        raise wrong
    return value


class RunLimits(NamedTuple):
    cpus: float
    memory: str
    timeout_sec: int


class OperatorLimits(Protocol):
    """The settings run_limits reads (pier.settings.Settings has them); declared
    here so that limits sits below settings, which checks sizes with it."""

    default_cpus: float
    max_cpus: float
    default_memory: str
    max_memory: str
    default_timeout_sec: int
    max_timeout_sec: int


def run_limits(
    cpus: Any, memory: Any, timeout_sec: Any, settings: OperatorLimits, asked: Mapping[str, Any] | None = None
) -> RunLimits:
    """The limits a run gets, by the rule above: the task's (cpus, memory,
    timeout_sec), lowered by what its init_params ask (`asked`), checked and held
    to the operator's maxima. None takes the default, lowered to the maximum when
    an operator set a smaller one. Raises LimitError naming the field."""
    asked = asked or {}
    task = {"cpus": cpus, "memory": memory, "timeout_sec": timeout_sec}
    chosen = {name: _lowered(name, task[name], asked.get(name)) for name in task}
    if chosen["cpus"] is None:
        chosen["cpus"] = min(settings.default_cpus, settings.max_cpus)
    if chosen["memory"] is None:
        chosen["memory"] = min(settings.default_memory, settings.max_memory, key=parse_size)
    if chosen["timeout_sec"] is None:
        chosen["timeout_sec"] = min(settings.default_timeout_sec, settings.max_timeout_sec)
    asked_cpus = _field("cpus", check_cpus, chosen["cpus"])
    asked_memory = _field("memory", check_memory, chosen["memory"])
    asked_timeout = _field("timeout_sec", check_timeout, chosen["timeout_sec"])
    if asked_cpus > settings.max_cpus:
        raise LimitError("cpus", _above_cpus(asked_cpus, settings.max_cpus))
    if parse_size(asked_memory) > parse_size(settings.max_memory):
        raise LimitError("memory", _above(asked_memory, settings.max_memory, "PIER_MAX_MEMORY"))
    if asked_timeout > settings.max_timeout_sec:
        raise LimitError(
            "timeout_sec",
            _above(f"{asked_timeout} seconds", str(settings.max_timeout_sec), "PIER_MAX_TIMEOUT_SEC"),
        )
    return RunLimits(asked_cpus, asked_memory, asked_timeout)


_CHECKS: dict[str, Any] = {"cpus": check_cpus, "memory": check_memory, "timeout_sec": check_timeout}
_SIZE_OF: dict[str, Any] = {"cpus": float, "memory": parse_size, "timeout_sec": int}


def _lowered(name: str, task: Any, asked: Any) -> Any:
    """The task's limit, or what init_params ask instead when that is no more.
    Raises LimitError when they ask for more."""
    if asked is None:
        return task
    value = _field(name, _CHECKS[name], asked)
    if task is None:
        return value
    ceiling = _field(name, _CHECKS[name], task)
    if _SIZE_OF[name](value) > _SIZE_OF[name](ceiling):
        raise LimitError(
            name,
            f"init_params asks for {asked}, more than the task allows ({task}): a run may lower the "
            f"task's limit, not raise it; ask for at most {task}, or change the task's own {name}",
        )
    return value


def _field(name: str, check: Any, value: Any) -> Any:
    try:
        return check(value)
    except ValueError as exc:
        raise LimitError(name, str(exc)) from None


def _above(asked: str, most: str, setting: str) -> str:
    return f"{asked} is more than pier allows a run (at most {most}, {setting}): ask for at most {most}"


def host_cpus() -> int:
    """The CPUs this process may use (its affinity: what a container or taskset left it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _above_cpus(asked: float, most: float) -> str:
    """PIER_MAX_CPUS is the operator's ceiling, not this machine's size: say
    both, and ask for what a run here can get."""
    cpus = host_cpus()
    if cpus >= most:
        return _above(f"{asked:g} CPUs", f"{most:g}", "PIER_MAX_CPUS")
    return (
        f"{asked:g} CPUs is more than pier allows a run (at most {most:g}, PIER_MAX_CPUS), and this "
        f"machine has {cpus} (a run here gets at most {cpus}): ask for at most {cpus}"
    )
