"""A follow-up turn: an agent CLI (claude-code, codex, opencode, gemini-cli) run
with --keep, then --continue-from, against the scripted model; the second run's
requests carry the first run's conversation."""

from __future__ import annotations

import json
import uuid

import pytest
from tests.integration.test_agents import CASES, runbook_text

from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration
FOLLOW_UP = "FOLLOW-UP-" + uuid.uuid4().hex[:8]


def go(text: str, image: str, env: dict, **params: object):
    task = task_from_runbook(parse(text))
    request = RunRequest(collection="agents", task_name="answer", task=task, env=env,
                         run_params={"snapshot": "", "image": image, **params})  # fmt: skip
    return run(Services(get_settings()), request)


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4], CASES[5]], ids=lambda c: c.id)
def test_a_follow_up_turn_carries_the_first_turns_conversation(
    case, agent_image, model_server, docker_backend
):
    env = {
        case.key_env: f"sk-pier-test-{uuid.uuid4().hex}",
        case.base_env: model_server.url + case.base_suffix,
    }
    first = go(runbook_text(case), agent_image, env, keep_sandbox=True)
    assert first.success, first.error
    try:
        model_server.clear()
        follow = (
            runbook_text(case).split("\n---\n", 1)[0] + f"\n---\n# Follow-up\n\n{FOLLOW_UP}: say it again.\n"
        )
        second = go(follow, agent_image, env, continue_from=first.trajectory_id)
        assert second.success, second.error
        bodies = [json.dumps(c.body) for c in model_server.model_calls() if c.path == case.path]
        assert bodies, "the follow-up never called the model"
        assert any(FOLLOW_UP in b and "six times seven" in b for b in bodies), bodies[-1][:2000]
    finally:
        docker_backend.remove(first.outputs.sandbox.id or "")
