"""Every runbook of the real corpus parses, renders and plans."""

from pathlib import Path

import pytest
from tests.conftest import CORPUS, corpus_or_skip

from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import load
from pier.settings import get_settings
from pier.tasks import resolve, task_from_runbook

RUNBOOKS = sorted(CORPUS.rglob("RUNBOOK.md"))


def test_corpus_is_there():
    """Without the corpus the parametrized test below has no cases: this one says so
    (a skip, or a failure under CI=true)."""
    corpus_or_skip()
    assert len(RUNBOOKS) == 115, f"expected the 115 corpus runbooks under {CORPUS}"


@pytest.mark.parametrize("path", RUNBOOKS, ids=lambda p: str(p.relative_to(CORPUS).parent))
def test_corpus_runbook_parses_renders_and_plans(path: Path):
    runbook = load(path)
    step = resolve(task_from_runbook(runbook))
    plan = build_plan(step, RunInputs("t1", "local", path.parent.name), get_settings())
    assert plan.agent == runbook.frontmatter.agent
    assert "{{results_dir}}" not in plan.instruction and "{{ results_dir }}" not in plan.instruction
    assert plan.snapshot == runbook.frontmatter.snapshot
    assert plan.primary_outputs == tuple(runbook.frontmatter.primary_outputs)
