"""The platform's chat-completions endpoint in runbook mode, driven by the
official OpenAI Python SDK (base_url = the server, extra_body={"jetty": ...})
against a real `pier serve`: the system message runs as a runbook in a
sandbox, template variables come from jetty.template_variables (never the
user's message), files by id and by path reach /app/assets, and the answer,
streamed or not, names the trajectory, its status and its outputs."""

from __future__ import annotations

import pytest
from openai import APIStatusError, OpenAI
from tests.support.api_server import Collection, make_collection, runbook

pytestmark = pytest.mark.integration

RUNBOOK_SCRIPT = (
    'echo "report on {{topic}} for {{reader}}" > {{results_dir}}/report.md; '
    "ls /app/assets > {{results_dir}}/assets.txt 2>/dev/null || true; echo wrote the report"
)


def client(collection: Collection, token: str | None = None) -> OpenAI:
    return OpenAI(
        base_url=collection.server.url, api_key=token or collection.token, max_retries=0, timeout=300
    )


def jetty(collection: Collection, **more) -> dict:
    return {"runbook": True, "collection": collection.name, "task": "chat-task", "agent": "script",
            "snapshot": "", **more}  # fmt: skip


def the_runbook(collection: Collection) -> str:
    return runbook(
        RUNBOOK_SCRIPT, image=collection.image, snapshot="", vars={"topic": "x", "reader": "everyone"}
    )


def test_runbook_mode_through_the_openai_sdk(collection: Collection):
    with collection.client() as c:
        made = c.post("/api/v1/files", files={"file": ("notes.txt", b"n")}).json()
    answer = client(collection).chat.completions.create(
        model="script",
        messages=[
            {"role": "system", "content": the_runbook(collection)},
            {"role": "user", "content": "Execute the runbook. topic=IGNORED"},
        ],
        extra_body={"jetty": jetty(collection, template_variables={"topic": "tides"}, files=[made["id"]])},
    )
    extra = answer.model_extra["jetty"]
    assert extra["status"] == "completed" and extra["success"] is True, answer
    text = answer.choices[0].message.content
    assert extra["trajectory_id"] in text and "completed" in text and "report.md" in text
    record = collection.record("chat-task", extra["trajectory_id"])
    with collection.client() as c:
        report = c.get(f"/api/v1/file/{collection.name}/chat-task/{extra['trajectory_id']}/results/report.md")
        assets = c.get(
            f"/api/v1/file/{collection.name}/chat-task/{extra['trajectory_id']}/results/assets.txt"
        )
    # the server substituted the variables: the given one, and the runbook's default for the other
    assert report.text.strip() == "report on tides for everyone"
    assert "IGNORED" not in report.text
    assert "notes" in assets.text  # the file named by id reached /app/assets
    assert record["init_params"]["agent"] == "script"


def test_streaming_gives_the_log_then_the_end(collection: Collection):
    stream = client(collection).chat.completions.create(
        model="script",
        messages=[{"role": "system", "content": the_runbook(collection)}],
        stream=True,
        extra_body={"jetty": jetty(collection, template_variables={"topic": "streams"})},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "Started run" in text and "wrote the report" in text  # the agent's log line, as it was written
    tid = chunks[-1].model_extra["jetty"]["trajectory_id"]
    assert f"Run {tid}" in text and "completed" in text
    assert collection.record("chat-task", tid)["status"] == "completed"


def test_runbook_mode_is_refused_for_another_collection(server, base_image, collection: Collection):
    other = make_collection(server, base_image, prefix="chat-other")
    with pytest.raises(APIStatusError) as refused:
        client(collection).chat.completions.create(
            model="script", messages=[{"role": "system", "content": the_runbook(collection)}],
            extra_body={"jetty": {**jetty(collection), "collection": other.name}},
        )  # fmt: skip
    assert refused.value.status_code == 403
    with other.client() as c:
        assert c.get(f"/api/v1/db/trajectories/{other.name}/chat-task").json()["total"] == 0


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"task": None}, 422, "jetty.task"),
        ({"file_paths": ["file-" + "0" * 32]}, 422, "init_params.files"),
        ({"template_variables": "x"}, 422, "jetty.template_variables"),
    ],
)
def test_bad_runbook_requests_say_which_field(collection: Collection, change, status, says):
    block = {k: v for k, v in {**jetty(collection), **change}.items() if v is not None}
    with collection.client() as c:
        r = c.post("/v1/chat/completions", json={"model": "script", "extra": 1, "jetty": block,
                                                 "messages": [{"role": "system", "content": the_runbook(collection)}]})  # fmt: skip
    assert r.status_code == status, r.text
    assert says in r.text, r.text
