"""The experiment pages: the list, one experiment's matrix (cells coloured by
pass rate, with cost per success), its per-axis summaries and comparisons, a
cell's runs, and the export links. The figures are the experiments service's
(the same results the API's GET route answers), refreshed live while the
experiment runs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from pier.experiments.results import failed_checks
from pier.record import Trajectory
from pier.server.services import experiments
from pier.web.render import page
from pier.web.session import PageCaller, StateDep

router = APIRouter(include_in_schema=False)
PART_HEADER = "x-pier-part"
AGENT_AXES = ("agent", "model", "provider")


def shade(rate: float | None) -> str:
    """The CSS class of a pass rate: pass-0 (0-9%) ... pass-10 (100%), or pass-none."""
    return "pass-none" if rate is None else f"pass-{int(rate * 10 + 1e-9)}"


def matrix(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Cells laid out as a grid: a row per agent/model/provider, a column per
    vars row and other params (one column when there are none)."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    columns: list[str] = []
    for cell in cells:
        axes = {**cell["axes"]}
        row = " / ".join(axes[a] for a in AGENT_AXES if a in axes) or "all"
        if "row" in axes and cell.get("row_label"):  # the input's values, not its index
            axes["row"] = cell["row_label"]
        column = ", ".join(v if k == "row" else f"{k} {v}" for k, v in axes.items() if k not in AGENT_AXES)
        column = column or "all"
        if column not in columns:
            columns.append(column)
        rows.setdefault(row, {})[column] = cell
    return {"rows": rows, "columns": columns}


def live_context(experiment: Any, results: dict[str, Any]) -> dict[str, Any]:
    """What the matrix, the axes, the comparisons and the failures show; vars
    rows by their values ("city=Paris"), never their index."""
    labels = {c["axes"]["row"]: c["row_label"] for c in results["cells"] if "row_label" in c}
    return {
        "experiment": experiment,
        "results": results,
        "grid": matrix(results["cells"]),
        "shade": shade,
        "k": experiment.spec.attempts,
        "ks": [str(k) for k in range(1, experiment.spec.attempts + 1)],
        "value_label": lambda axis, value: labels.get(value, value) if axis == "row" else value,
        "api": f"/api/v1/experiments/{experiment.stored.collection}/{experiment.id}",
    }


@router.get("/experiments")
def experiments_page(request: Request, state: StateDep, caller: PageCaller) -> HTMLResponse:
    return page(request, "experiments.html", {"experiments": experiments.visible_list(state, caller)})


@router.get("/experiments/{experiment_id}")
def experiment_page(
    request: Request, state: StateDep, caller: PageCaller, experiment_id: str
) -> HTMLResponse:
    experiment = experiments.visible(state, caller, experiment_id)
    results = experiments.results(state, experiment)
    context = live_context(experiment, results)
    if request.headers.get(PART_HEADER) == "matrix":
        return page(request, "_experiment_live.html", context)
    return page(request, "experiment.html", context)


@router.get("/experiments/{experiment_id}/cells/{cell}")
def cell_page(
    request: Request, state: StateDep, caller: PageCaller, experiment_id: str, cell: int
) -> HTMLResponse:
    experiment = experiments.visible(state, caller, experiment_id)
    found = experiments.cell(state, experiment, cell)
    context = {"experiment": experiment, "cell": found.cell, "tries": found.tries, "summary": found.summary,
               "shade": shade, "failure": failure}  # fmt: skip
    return page(request, "experiment_cell.html", context)


def failure(run: Trajectory | None) -> str:
    """What a failed run says: its error, or its failing check's message."""
    if run is None or not run.status.terminal or run.success:
        return ""
    return run.error or failed_checks(run)
