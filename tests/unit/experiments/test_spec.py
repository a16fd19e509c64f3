"""An experiment's definition: the cells a matrix expands to, the file form
(runbook and dataset read in), and refusals that name the field and the runs
it would have started, before any run starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.errors import InputError
from pier.experiments.check import check
from pier.experiments.spec import ExperimentError, ExperimentSpec, cells, dataset_rows, load_file, parse_spec
from pier.tasks.model import Task

TASK = Task(init_params={"instruction": "Summarise {{city}} for {{audience}}. Write to {{results_dir}}.",
                         "agent": "claude-code", "vars": {"audience": "kids"}})  # fmt: skip


def spec(**fields: Any) -> ExperimentSpec:
    return parse_spec({"name": "e", "task": "t", **fields})


def accept_all(_params: dict[str, Any]) -> None:
    return None


def test_cells_cover_the_product_of_the_axes_in_a_fixed_order() -> None:
    found = cells(spec(matrix={
        "agents": [{"name": "claude-code", "models": ["claude-sonnet-4-5", "claude-haiku-4-5"]},
                   {"name": "codex", "models": ["gpt-5"], "providers": ["openai", "openrouter"]}],
        "vars": [{"city": "Paris"}, {"city": "Lima"}],
        "params": {"timeout_sec": [600, 1200]},
    }))  # fmt: skip
    assert len(found) == (2 + 2) * 2 * 2
    assert [c.index for c in found] == list(range(16))
    first = found[0]
    assert first.key == "claude-code/claude-sonnet-4-5/row0/timeout_sec=600"
    assert first.init_params == {"agent": "claude-code", "model": "claude-sonnet-4-5",
                                 "vars": {"city": "Paris"}, "timeout_sec": 600}  # fmt: skip
    assert {c.provider for c in found if c.agent == "codex"} == {"openai", "openrouter"}
    assert len({c.key for c in found}) == 16


def test_without_axes_there_is_one_cell() -> None:
    (only,) = cells(spec(attempts=3))
    assert only.key == "all" and only.init_params == {}


def test_dataset_rows_from_jsonl_and_csv() -> None:
    assert dataset_rows('{"city": "Paris"}\n\n{"city": "Lima", "n": 2}\n', "d.jsonl") == [
        {"city": "Paris"}, {"city": "Lima", "n": 2},
    ]  # fmt: skip
    assert dataset_rows("city,audience\nParis,kids\nLima,adults\n", "d.csv") == [
        {"city": "Paris", "audience": "kids"}, {"city": "Lima", "audience": "adults"},
    ]  # fmt: skip
    with pytest.raises(ExperimentError, match=r"d.jsonl:2: not JSON"):
        dataset_rows('{"city": "Paris"}\n{oops\n', "d.jsonl")


def test_load_file_reads_the_runbook_and_dataset_beside_it(tmp_path: Path) -> None:
    (tmp_path / "RUNBOOK.md").write_text("---\nagent: script\n---\n```bash\necho {{city}}\n```\n")
    (tmp_path / "cities.csv").write_text("city\nParis\nLima\n")
    (tmp_path / "experiment.yaml").write_text(
        "name: cities\nrunbook: RUNBOOK.md\nmatrix:\n  dataset: cities.csv\nattempts: 2\n"
    )
    found = load_file(tmp_path / "experiment.yaml")
    assert found.runbook is not None and "echo {{city}}" in found.runbook
    assert found.matrix.vars == [{"city": "Paris"}, {"city": "Lima"}]
    assert found.matrix.dataset == "cities.csv"


def test_unknown_fields_and_bad_values_name_the_field() -> None:
    with pytest.raises(ExperimentError) as caught:
        parse_spec({"name": "e", "task": "t", "matrix": {"agent": []}})
    assert caught.value.field == "matrix.agent"
    with pytest.raises(ExperimentError) as caught:
        parse_spec({"name": "e", "task": "t", "attempts": 0})
    assert caught.value.field == "attempts"
    with pytest.raises(ExperimentError, match=r"params\.model"):
        parse_spec({"name": "e", "task": "t", "matrix": {"params": {"model": ["x"]}}})


@pytest.mark.parametrize(
    ("matrix", "field"),
    [
        ({"agents": [{"name": "claude-kode"}]}, "matrix.agents[0].name"),
        ({"agents": [{"name": "claude-code"}, {"name": "codex", "providers": ["google"]}]},
         "matrix.agents[1].providers[0]"),
        ({"agents": [{"name": "gemini-cli", "models": ["gemini-2.5-pro", "claude-sonnet-4-5"]}]},
         "matrix.agents[0].models[1]"),
        ({"agents": [{"name": "codex", "models": ["claude-sonnet-4-5"], "providers": ["openai"]}]},
         "matrix.agents[0].models[0]"),
        ({"vars": [{"city": "Paris"}, {"town": "Lima"}]}, "matrix.vars[1]"),
    ],
)  # fmt: skip
def test_a_matrix_that_cannot_run_is_refused_naming_the_field_and_the_runs(matrix: dict, field: str) -> None:
    definition = spec(matrix=matrix, attempts=5)
    with pytest.raises(ExperimentError) as caught:
        check(definition, TASK, accept_all, max_runs=10_000)
    assert caught.value.field == field
    runs = len(cells(definition)) * 5
    assert caught.value.runs == runs
    assert f"it would start {runs} run(s); none was started" in str(caught.value)


def test_rows_may_leave_out_what_the_task_gives_and_builtins() -> None:
    definition = spec(matrix={"vars": [{"city": "Paris"}, {"city": "Lima", "audience": "adults"}]})
    assert len(check(definition, TASK, accept_all, max_runs=100)) == 2


def test_each_cell_goes_through_the_run_preflight() -> None:
    seen: list[dict] = []

    def preflight(params: dict[str, Any]) -> None:
        seen.append(params)
        if params.get("model") == "claude-haiku-4-5":
            raise InputError("agent claude-code needs the API key in ANTHROPIC_API_KEY")

    definition = spec(matrix={"agents": [{"name": "claude-code", "models": ["claude-sonnet-4-5", "claude-haiku-4-5"]}]},
                      attempts=3)  # fmt: skip
    with pytest.raises(ExperimentError) as caught:
        check(definition, TASK, preflight, max_runs=100)
    assert caught.value.field == "cell claude-code/claude-haiku-4-5"
    assert "ANTHROPIC_API_KEY" in str(caught.value) and caught.value.runs == 6
    assert len(seen) == 2


def test_more_runs_than_the_server_allows_is_refused() -> None:
    definition = spec(matrix={"vars": [{"city": str(i)} for i in range(10)]}, attempts=20)
    with pytest.raises(ExperimentError) as caught:
        check(definition, TASK, accept_all, max_runs=100)
    assert caught.value.field == "matrix" and caught.value.runs == 200
