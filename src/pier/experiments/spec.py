"""An experiment's definition: one task over a matrix, and the cells it expands to.

    name: agents-vs-models
    task: summarise              # a task stored in the collection, or
    runbook: ./RUNBOOK.md        # a runbook (a file path in experiment.yaml, its text over the API)
    matrix:
      agents:
        - {name: claude-code, models: [claude-sonnet-4-5, claude-haiku-4-5]}
        - {name: codex, models: [gpt-5], providers: [openai]}
      vars: [{city: Paris}, {city: Lima}]   # or dataset: inputs.jsonl (or .csv), one row a set
      params: {timeout_sec: [600, 1200]}     # other init_params axes
    attempts: 5
    concurrency: 4
    budget: {cost_usd: 20, tokens: 2000000, wall_time_sec: 7200}

A cell is one combination (agent, model, provider, vars row, params); every
cell runs `attempts` times. The file form and the API's JSON are the same
model (`ExperimentSpec`) except that the file may name a runbook and a dataset
by path: `load_file` reads both in, so what is stored never points at a file.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pier.agents import AGENT_NAMES
from pier.errors import InputError

MAX_ATTEMPTS = 1000


class ExperimentError(InputError):
    """A definition that cannot run; `field` names the part (the API's 422
    names it), `runs` how many runs it would have started when that is known."""

    def __init__(self, field: str, message: str, runs: int | None = None):
        would = f" (it would start {runs} run(s); none was started)" if runs is not None else ""
        super().__init__(f"{field}: {message}{would}")
        self.field = field
        self.message = message
        self.runs = runs
        self.detail = message + would  # the message without the field (the API's 422 names it apart)


class AgentAxis(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description=f"an agent pier runs ({', '.join(AGENT_NAMES)})")
    models: list[str] = Field(default_factory=list, description="models to try; none: the task's")
    providers: list[str] = Field(
        default_factory=list, description="model providers to try; none: the default"
    )


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agents: list[AgentAxis] = Field(default_factory=list, description="none: the task's agent")
    vars: list[dict[str, Any]] = Field(default_factory=list, description="vars sets, one cell each")
    dataset: str | None = Field(None, description="the JSONL/CSV file the vars came from (its name)")
    params: dict[str, list[Any]] = Field(default_factory=dict, description="other init_params axes")


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cost_usd: float | None = Field(None, gt=0, description="stop starting runs once this much was spent")
    tokens: int | None = Field(None, gt=0, description="stop starting runs once this many tokens were used")
    wall_time_sec: float | None = Field(
        None, gt=0, description="stop starting runs this long after the start"
    )


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    task: str | None = Field(None, description="a task stored in the collection")
    runbook: str | None = Field(None, description="a RUNBOOK.md's text (instead of task)")
    init_params: dict[str, Any] = Field(default_factory=dict, description="for every run")
    matrix: Matrix = Field(default_factory=Matrix)
    attempts: int = Field(1, ge=1, le=MAX_ATTEMPTS)
    concurrency: int = Field(4, ge=1, le=1000, description="runs of this experiment at once, at most")
    budget: Budget = Field(default_factory=Budget)
    infra_retries: int = Field(
        2, ge=0, le=10, description="times an attempt that failed for an infrastructure reason is run again"
    )

    @field_validator("matrix")
    @classmethod
    def _axes(cls, matrix: Matrix) -> Matrix:
        for key, values in matrix.params.items():
            if key in ("agent", "model", "model_provider", "vars"):
                raise ValueError(f"params.{key}: give it as matrix.agents (or matrix.vars) instead")
            if not values:
                raise ValueError(f"params.{key} has no values: give at least one")
        return matrix


class Cell(BaseModel):
    """One combination of the matrix; `init_params` is what its runs add to the task's."""

    index: int
    key: str
    agent: str | None = None
    model: str | None = None
    provider: str | None = None
    row: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    init_params: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, Any] = Field(default_factory=dict)  # the vars row's own values

    def row_label(self) -> str | None:
        """The vars row by its values ("city=Paris, days=3"), for people to read;
        None without a row. Cells stored before `inputs` use their vars."""
        if self.row is None:
            return None
        values = self.inputs or self.init_params.get("vars") or {}
        text = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in values.items())
        return (text[:77] + "...") if len(text) > 80 else (text or f"row {self.row}")

    def axes(self) -> dict[str, str]:
        """The cell's value on each axis, as text (for per-axis summaries)."""
        found = {"agent": self.agent, "model": self.model, "provider": self.provider}
        axes = {k: v for k, v in found.items() if v is not None}
        if self.row is not None:
            axes["row"] = str(self.row)
        axes.update({k: json.dumps(v) if not isinstance(v, str) else v for k, v in self.params.items()})
        return axes


def _or_none(values: list[str]) -> list[str | None]:
    """The values, or one "not set" when there are none (the task's own choice)."""
    return [*values] if values else [None]


def cells(spec: ExperimentSpec, workflow: bool = False) -> list[Cell]:
    """The matrix's cells, in a fixed order (the order runs interleave in). A
    runbook task's vars row fills its {{variables}} (init_params.vars); a
    workflow task's row is init_params its steps read by path
    (`init_params.<key>`), over the experiment's."""
    agent_choices: list[tuple[str | None, str | None, str | None]] = [
        (axis.name, model, provider)
        for axis in spec.matrix.agents
        for model in _or_none(axis.models)
        for provider in _or_none(axis.providers)
    ] or [(None, None, None)]
    rows: list[int | None] = list(range(len(spec.matrix.vars))) or [None]
    keys = list(spec.matrix.params)
    combos = list(itertools.product(*(spec.matrix.params[k] for k in keys)))
    found: list[Cell] = []
    for (agent, model, provider), row, combo in itertools.product(agent_choices, rows, combos):
        params = dict(zip(keys, combo, strict=True))
        init = {**spec.init_params, **params}
        for name, value in (("agent", agent), ("model", model), ("model_provider", provider)):
            if value is not None:
                init[name] = value
        if row is not None and workflow:
            init.update(spec.matrix.vars[row])
        elif row is not None:
            init["vars"] = {**(spec.init_params.get("vars") or {}), **spec.matrix.vars[row]}
        parts = [p for p in (agent, model, provider) if p]
        parts += [f"row{row}"] if row is not None else []
        parts += [f"{k}={v}" for k, v in params.items()]
        found.append(
            Cell(index=len(found), key="/".join(parts) or "all", agent=agent, model=model,
                 provider=provider, row=row, params=params, init_params=init,
                 inputs=dict(spec.matrix.vars[row]) if row is not None else {})
        )  # fmt: skip
    return found


def run_count(spec: ExperimentSpec) -> int:
    return len(cells(spec)) * spec.attempts


# reading the file form


def load_file(path: Path) -> ExperimentSpec:
    """experiment.yaml (or .json) with its runbook and dataset read in; paths in
    it are relative to the file's folder."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExperimentError("file", f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ExperimentError("file", f"{path} is not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentError("file", f"{path} must hold a mapping (name:, task: or runbook:, matrix: ...)")
    here = path.parent
    if isinstance(data.get("runbook"), str):
        data["runbook"] = _read(here / data["runbook"], "runbook")
    matrix = data.get("matrix")
    if isinstance(matrix, dict) and isinstance(matrix.get("dataset"), str):
        if matrix.get("vars"):
            raise ExperimentError("matrix.dataset", "give vars inline or a dataset file, not both")
        file = here / matrix["dataset"]
        matrix["vars"] = dataset_rows(_read(file, "matrix.dataset"), file.name)
        matrix["dataset"] = file.name
    return parse_spec(data)


def parse_spec(data: Any) -> ExperimentSpec:
    """The definition, or ExperimentError naming the first bad field."""
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "experiment"
        raise ExperimentError(where, first["msg"]) from None


def _read(path: Path, field: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExperimentError(field, f"cannot read {path}: {exc.strerror}: check the path") from None


def dataset_rows(text: str, name: str) -> list[dict[str, Any]]:
    """A dataset's rows: JSONL (one object a line) or CSV (a header line, then rows)."""
    if name.lower().endswith(".csv"):
        return [dict(row) for row in csv.DictReader(io.StringIO(text))]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ExperimentError("matrix.dataset", f"{name}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ExperimentError("matrix.dataset", f"{name}:{number}: a row must be a JSON object")
        rows.append(row)
    if not rows:
        raise ExperimentError("matrix.dataset", f"{name} has no rows")
    return rows
