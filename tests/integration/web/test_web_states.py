"""The live run page moves with the log: once the log shows the agent's lines,
the stages say the agent is running, even while the user's focus is in the
run's summary (whose refresh waits for the focus to leave)."""

from __future__ import annotations

import pytest
from tests.integration.web.test_web_ui import sign_in
from tests.support.api_server import Collection, Server

pytestmark = pytest.mark.integration

TICKING = "for i in $(seq 1 200); do echo tick-$i; sleep 0.1; done\necho done > {{results_dir}}/done.txt"


def test_the_stages_follow_the_log_while_the_focus_is_in_the_summary(
    chromium, web_server: Server, web_collection: Collection
):
    web_collection.put_task("ticking", TICKING)
    page = sign_in(chromium, web_server, web_collection.token)
    tid = web_collection.run("ticking")
    page.goto(f"{web_server.url}/runs/{tid}")
    page.locator("text=Run again…").focus()  # a keyboard user resting on a button of the summary
    page.locator("#log").get_by_text("tick-10").wait_for(timeout=120_000)
    agent = page.locator("#run-stages li[data-stage=run_agent] .sstatus")
    agent.get_by_text("running").wait_for(timeout=5_000)
    for earlier in ("prepare", "create", "setup"):
        assert page.locator(f"#run-stages li[data-stage={earlier}] .sstatus").inner_text() == "completed"
    page.locator("#log").get_by_text("tick-200").wait_for(timeout=120_000)
    page.locator("#run-stages li[data-stage=save] .sstatus").get_by_text("completed").wait_for(timeout=30_000)
    page.context.close()
