"""`pier validate` looks the image up: on this machine's engine, then in its
registry (a real registry server on 127.0.0.1 that counts what it is asked),
and says when it cannot (no engine, a registry that does not answer, lookups
turned off). An image that exists nowhere passed validate before."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier import cli
from pier.settings import get_settings

pytestmark = pytest.mark.integration
runner = CliRunner()
THERE = "there"  # the one repository the registry has


class Registry(http.server.ThreadingHTTPServer):
    asked: list[str]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Registry

    def _answer(self) -> None:
        self.server.asked.append(self.path)
        headers = {"Content-Type": "application/json"}
        if self.path.rstrip("/") == "/v2":
            status, body = 200, b"{}"
        elif self.path.startswith(f"/v2/{THERE}/manifests/"):
            status = 200
            body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                               "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2,
                                          "digest": "sha256:" + "a" * 64}, "layers": []}).encode()  # fmt: skip
            headers = {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json",
                       "Docker-Content-Digest": "sha256:" + "b" * 64}  # fmt: skip
        else:
            status = 404
            body = json.dumps(
                {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
            ).encode()
        self.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = _answer

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def registry(docker_backend, monkeypatch) -> Iterator[Registry]:
    server = Registry(("127.0.0.1", 0), Handler)
    server.asked = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", "127.0.0.1")  # the operator lets runs use a registry here
    monkeypatch.setenv("PIER_IMAGE_LOOKUP_REGISTRY", "true")
    get_settings.cache_clear()
    yield server
    server.shutdown()
    get_settings.cache_clear()


def validate(tmp_path: Path, image: str):
    book = tmp_path / "RUNBOOK.md"
    book.write_text(
        f'---\nagent: script\nsnapshot: ""\nimage: "{image}"\n---\n```bash\necho hi > {{{{results_dir}}}}/x\n```\n'
    )
    done = runner.invoke(cli.app, ["validate", str(book)])
    return done.exit_code, " ".join(done.output.split())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


def test_an_image_in_neither_the_engine_nor_its_registry_is_an_error(registry, tmp_path):
    ref = f"127.0.0.1:{registry.server_port}/nosuch:v9"
    code, text = validate(tmp_path, ref)
    assert code == 1, text
    assert (
        f"image {ref} does not exist: this machine's engine does not have it and its registry has no such"
        in text
    )
    assert any(path.startswith("/v2/nosuch/manifests/v9") for path in registry.asked), registry.asked


def test_an_image_its_registry_has_or_the_engine_has_passes(registry, tmp_path, base_image):
    code, text = validate(tmp_path, f"127.0.0.1:{registry.server_port}/{THERE}:v1")
    assert code == 0 and "warning" not in text, text
    asked = len(registry.asked)
    code, text = validate(tmp_path, base_image)
    assert code == 0 and "warning" not in text, text
    assert len(registry.asked) == asked  # found on this machine: no registry is asked


def test_a_registry_that_does_not_answer_is_said_not_passed_silently(registry, tmp_path):
    ref = f"127.0.0.1:{closed_port()}/x:v1"
    code, text = validate(tmp_path, ref)
    assert code == 0, text  # cannot tell is no error
    assert f"image {ref} is not on this machine, and its registry could not tell" in text, text
    assert "whether it exists is not known until a run pulls it" in text


def test_no_engine_or_lookups_off_are_said(registry, tmp_path, monkeypatch):
    ref = f"127.0.0.1:{registry.server_port}/nosuch:v9"
    monkeypatch.setenv("PIER_IMAGE_LOOKUP_REGISTRY", "false")
    get_settings.cache_clear()
    code, text = validate(tmp_path, ref)
    assert code == 0 and "its registry was not asked (PIER_IMAGE_LOOKUP_REGISTRY is false)" in text, text
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    get_settings.cache_clear()
    code, text = validate(tmp_path, ref)
    assert code == 0 and f"image {ref} could not be looked up: No Docker engine answers" in text, text
