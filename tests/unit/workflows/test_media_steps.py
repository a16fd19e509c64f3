"""Image, video and vision steps against a scripted provider on 127.0.0.1
(tests/support/media_server.py), through pier's model gateway: the
platform's image-generation templates run unchanged, what the provider made
is stored as the run's files (read back over the API, shown on the run
page), a vision step reads an earlier step's image by its path, and each
provider's key reaches only the provider."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from tests.support.media_server import MP4, PNG, MediaServer
from tests.unit.workflows.conftest import ADMIN, Api, make_settings

REPLICATE_KEY = "r8_" + "r" * 30
GEMINI_KEY = "AIza" + "g" * 30
OPENAI_KEY = "sk-openai-" + "v" * 24

# workflow-templates.md's "Image Generation + Vision Judge Pipeline", its judge a vision step
IMAGE_THEN_VISION = {
    "init_params": {"prompt": "a detective in the rain"},
    "step_configs": {
        "generate_image": {"activity": "replicate_text2image", "model": "black-forest-labs/flux-schnell",
                           "prompt_path": "init_params.prompt", "width": 1024, "height": 768, "num_outputs": 1},
        "describe": {"activity": "litellm_vision", "model": "gpt-4o", "prompt": "What is in this image?",
                     "image_path_expr": "generate_image.outputs.images[0].path"},
    },
    "steps": ["generate_image", "describe"],
}  # fmt: skip
# the skills repository's templates/image-generation.json: replicate_run with paths inside `input`
IMAGE_GENERATION = {
    "init_params": {"prompt": "A serene mountain landscape at sunset, digital art style",
                    "aspect_ratio": "16:9", "num_outputs": 1},
    "step_configs": {"generate": {"activity": "replicate_run", "model": "black-forest-labs/flux-schnell",
                                  "input": {"prompt_path": "init_params.prompt",
                                            "aspect_ratio_path": "init_params.aspect_ratio",
                                            "num_outputs_path": "init_params.num_outputs"}}},
    "steps": ["generate"],
}  # fmt: skip
GEMINI = {
    "init_params": {"prompt": "a fluffy orange tabby cat sitting in a sunbeam"},
    "step_configs": {"generate_image": {"activity": "gemini_image_generator", "prompt_path": "init_params.prompt"}},
    "steps": ["generate_image"],
}  # fmt: skip


@pytest.fixture
def provider() -> Iterator[MediaServer]:
    server = MediaServer().start()
    yield server
    server.stop()


@pytest.fixture
def api(tmp_path: Path, provider: MediaServer) -> Iterator[Api]:
    port = provider.url.rsplit(":", 1)[1]
    settings = make_settings(tmp_path, collection_upstreams={"team": [f"127.0.0.1:{port}"]})
    with TestClient(
        create_app(settings, pages=web.install), headers={"Authorization": f"Bearer {ADMIN}"}
    ) as c:
        assert c.post("/api/v1/collections", json={"name": "team"}).status_code in (200, 201)
        env = {"REPLICATE_API_TOKEN": REPLICATE_KEY, "REPLICATE_BASE_URL": provider.url,
               "GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_GEMINI_BASE_URL": provider.url,
               "OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": provider.url + "/v1"}  # fmt: skip
        put = c.patch("/api/v1/collections/team/environment", json={"environment_variables": env})
        assert put.status_code == 200, put.text
        yield Api(c)


def test_a_generated_image_is_a_file_of_the_run_and_a_vision_step_reads_it(api, provider):
    assert api.task("detective", IMAGE_THEN_VISION).status_code in (200, 201)
    run = api.run("detective")
    assert run["status"] == "completed", run["error"]
    (image,) = run["steps"]["generate_image"]["outputs"]["images"]
    assert (
        image["path"] == f"{run['storage_path']}/generate_image.0000.png"
        and image["content_type"] == "image/png"
    )
    assert api.c.get(f"/api/v1/file/{image['path']}").content == PNG  # stored as the run's file
    (prediction,) = provider.seen("/v1/models/black-forest-labs/flux-schnell/predictions")
    assert prediction.body["input"] == {"prompt": "a detective in the rain", "width": 1024, "height": 768,
                                        "num_outputs": 1}  # fmt: skip
    assert prediction.headers["authorization"] == f"Bearer {REPLICATE_KEY}"  # the gateway swapped its token
    (vision,) = provider.seen("/v1/chat/completions")
    parts = vision.body["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What is in this image?"}
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert vision.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    described = run["steps"]["describe"]["outputs"]
    assert described["text"] == "a small square" and described["usage"]["prompt_tokens"] == 100
    assert run["usage"]["requests"] == 2 and run["usage"]["total_tokens"] == 104
    dumped = json.dumps(run)
    assert REPLICATE_KEY not in dumped and OPENAI_KEY not in dumped
    api.c.cookies.set("pier_session", ADMIN)
    page = api.c.get(f"/runs/{run['trajectory_id']}")
    assert page.status_code == 200 and f'<img src="/api/v1/file/{image["path"]}"' in page.text


def test_the_platforms_replicate_run_template_reads_paths_inside_input(api, provider):
    assert api.task("landscape", IMAGE_GENERATION).status_code in (200, 201)
    run = api.run("landscape")
    assert run["status"] == "completed", run["error"]
    (prediction,) = provider.seen("/v1/models/black-forest-labs/flux-schnell/predictions")
    assert prediction.body["input"] == {"prompt": "A serene mountain landscape at sunset, digital art style",
                                        "aspect_ratio": "16:9", "num_outputs": 1}  # fmt: skip
    (made,) = run["steps"]["generate"]["outputs"]["files"]
    assert api.c.get(f"/api/v1/file/{made['path']}").content == PNG


def test_a_video_step_stores_the_video_and_the_run_page_plays_it(api, provider):
    wf = {"init_params": {"prompt": "waves"},
          "step_configs": {"clip": {"activity": "replicate_text2video", "model": "acme/text-to-video",
                                    "prompt_path": "init_params.prompt"}},
          "steps": ["clip"]}  # fmt: skip
    assert api.task("waves", wf).status_code in (200, 201)
    run = api.run("waves")
    assert run["status"] == "completed", run["error"]
    (video,) = run["steps"]["clip"]["outputs"]["videos"]
    assert (
        video["path"].endswith("clip.0000.mp4") and api.c.get(f"/api/v1/file/{video['path']}").content == MP4
    )
    api.c.cookies.set("pier_session", ADMIN)
    assert (
        f'<video controls src="/api/v1/file/{video["path"]}"'
        in api.c.get(f"/runs/{run['trajectory_id']}").text
    )


def test_a_gemini_image_step_stores_the_image_and_counts_its_tokens(api, provider):
    assert api.task("cat", GEMINI).status_code in (200, 201)
    run = api.run("cat")
    assert run["status"] == "completed", run["error"]
    (call,) = provider.seen("/v1beta/models/gemini-2.5-flash-image:generateContent")
    assert call.headers["x-goog-api-key"] == GEMINI_KEY
    assert "a fluffy orange tabby cat" in json.dumps(call.body)
    (image,) = run["steps"]["generate_image"]["outputs"]["images"]
    assert api.c.get(f"/api/v1/file/{image['path']}").content == PNG
    assert run["usage"]["completion_tokens"] == 1290  # what the gateway read from usageMetadata


def test_an_image_step_without_its_key_is_refused_before_it_runs(api, provider):
    api.c.patch(
        "/api/v1/collections/team/environment", json={"environment_variables": {"REPLICATE_API_TOKEN": None}}
    )
    assert api.task("landscape", IMAGE_GENERATION).status_code in (200, 201)
    refused = api.c.post("/api/v1/run/team/landscape", data={"init_params": "{}"})
    assert refused.status_code == 422 and "REPLICATE_API_TOKEN" in refused.text, refused.text
    assert provider.requests == []


def test_paths_inside_input_and_an_image_path_expr_are_checked_when_the_task_is_stored(api, provider):
    wf = {
        "init_params": {},
        "step_configs": {
            "generate": {"activity": "replicate_run", "model": "acme/m", "input": {"prompt_path": "later.outputs.text"}},
            "look": {"activity": "litellm_vision", "model": "gpt-4o", "prompt": "?",
                     "image_path_expr": "later.outputs.images[0].path"},
            "later": {"activity": "text_echo", "text": "x"},
        },
        "steps": ["generate", "look", "later"],
    }  # fmt: skip
    refused = api.task("bad", wf)
    assert refused.status_code == 422, refused.text
    fields = {e["field"] for e in refused.json()["errors"]}
    assert {
        "workflow.step_configs.generate.input.prompt_path",
        "workflow.step_configs.look.image_path_expr",
    } <= fields, fields
    assert provider.requests == []
