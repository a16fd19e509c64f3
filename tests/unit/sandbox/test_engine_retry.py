"""Which engine calls are tried again after a transient engine error, and
which never are (pier.sandbox.docker.retrying); on a real engine behind a
failing proxy: tests/integration/faults/test_engine_errors.py."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest
import requests

from pier.sandbox.docker.retrying import RetryingEngine
from pier.sandbox.runlog import to_run_log


def api_error(status: int, message: str = "busy") -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(message, response=response, explanation=message)


class FakeApi:
    """Fails each verb as `failures` says (a list of errors raised in turn)."""

    def __init__(self, **failures: list[BaseException]):
        self.failures = failures
        self.calls: list[str] = []
        self.containers_made: dict[str, dict] = {}
        self.exec_state: dict[str, Any] = {"Running": False, "ExitCode": None, "Pid": 0}

    def _maybe_fail(self, verb: str) -> None:
        self.calls.append(verb)
        pending = self.failures.get(verb) or []
        if pending:
            raise pending.pop(0)

    def create_container(self, name: str, labels: dict, **_: Any) -> dict:
        if name in self.containers_made:
            self.calls.append("create_container")
            raise api_error(409, f"Conflict. The container name {name} is already in use")
        # the engine adds the image's labels to the container's
        self.containers_made[name] = {"Id": f"id-{name}", "Config": {"Labels": {**labels, "maintainer": "x"}}}
        self._maybe_fail("create_container")
        return {"Id": f"id-{name}"}

    def inspect_container(self, name: str) -> dict:
        self._maybe_fail("inspect_container")
        return self.containers_made[name]

    def exec_start(self, exec_id: str, **_: Any) -> str:
        self._maybe_fail("exec_start")
        return "stream"

    def exec_inspect(self, exec_id: str) -> dict:
        return self.exec_state

    def put_archive(self, container: str, path: str, data: Any) -> bool:
        self._maybe_fail("put_archive")
        return True

    def kill(self, container: str) -> None:
        self._maybe_fail("kill")


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pier.sandbox.docker.retrying.FIRST_WAIT_SEC", 0.01)


def test_a_create_whose_answer_was_lost_takes_the_container_it_made() -> None:
    lost = requests.ConnectionError("Connection aborted: Remote end closed connection without response")
    api = FakeApi(create_container=[lost])
    lines: list[str] = []
    with to_run_log(lines.append):
        made = RetryingEngine(api, 5).create_container(name="pier-r1-ab", labels={"pier.run": "r1"})
    assert made["Id"] == "id-pier-r1-ab" and list(api.containers_made) == ["pier-r1-ab"]
    assert any("trying again" in line for line in lines) and any("taking it" in line for line in lines)


def test_a_name_taken_by_another_container_is_the_engines_409() -> None:
    api = FakeApi()
    api.containers_made["pier-r1-ab"] = {"Id": "theirs", "Config": {"Labels": {"pier.run": "other"}}}
    with pytest.raises(docker.errors.APIError) as raised:
        RetryingEngine(api, 5).create_container(name="pier-r1-ab", labels={"pier.run": "r1"})
    assert raised.value.status_code == 409, "a first try's 409 is not ours to take"


def test_an_exec_is_started_again_only_when_it_never_started() -> None:
    api = FakeApi(exec_start=[api_error(503)])
    assert RetryingEngine(api, 5).exec_start("e1", stream=True) == "stream"
    assert api.calls == ["exec_start", "exec_start"]

    api = FakeApi(exec_start=[requests.ConnectionError("reset")])
    api.exec_state = {"Running": True, "ExitCode": None, "Pid": 42}
    with pytest.raises(requests.ConnectionError):
        RetryingEngine(api, 5).exec_start("e1", stream=True)
    assert api.calls == ["exec_start"], "a command that may have started is never started twice"


def test_bytes_are_sent_again_a_stream_never() -> None:
    api = FakeApi(put_archive=[api_error(500)])
    assert RetryingEngine(api, 5).put_archive("c", "/", b"tar")
    api = FakeApi(put_archive=[api_error(500)])
    with pytest.raises(docker.errors.APIError):
        RetryingEngine(api, 5).put_archive("c", "/", iter([b"tar"]))
    assert api.calls == ["put_archive"]


def test_a_tar_kept_in_a_file_is_sent_again_whole(tmp_path) -> None:
    """Set-up's archive (its files, assets, credentials) is a tar in a file,
    streamed: a 500 while sending it is tried again from the file's start, and
    the engine gets the whole tar on the second try. Before, any stream was
    sent once and the run failed at set-up."""
    from pier.sandbox.docker.sandbox import _after
    from pier.sandbox.tarutil import FileTar

    tar = tmp_path / "setup.tar"
    tar.write_bytes(b"0123456789" * 1000)
    received: list[bytes] = []

    class ReadingApi(FakeApi):
        def put_archive(self, container: str, path: str, data: Any) -> bool:
            body = b"".join(data)  # as the engine's HTTP client reads the body
            self._maybe_fail("put_archive")
            received.append(body)
            return True

    api = ReadingApi(put_archive=[api_error(500)])
    assert RetryingEngine(api, 5).put_archive("c", "/", FileTar(tar, size=4096))
    assert api.calls == ["put_archive", "put_archive"]
    assert received == [tar.read_bytes()]
    # create's files put in front keep it whole and resendable
    api, received[:] = ReadingApi(put_archive=[api_error(503)]), []
    assert RetryingEngine(api, 5).put_archive("c", "/", _after(b"HEAD", FileTar(tar)))
    assert received == [b"HEAD" + tar.read_bytes()]
    api = ReadingApi(put_archive=[api_error(503)])
    with pytest.raises(docker.errors.APIError):  # a generator behind the head: once
        RetryingEngine(api, 5).put_archive("c", "/", _after(b"HEAD", iter([b"tar"])))


def test_errors_that_are_no_moment_and_verbs_not_repeatable_are_tried_once() -> None:
    api = FakeApi(inspect_container=[api_error(404, "No such container")])
    api.containers_made["c"] = {}
    with pytest.raises(docker.errors.APIError):
        RetryingEngine(api, 5).inspect_container("c")
    api = FakeApi(kill=[api_error(503)])
    with pytest.raises(docker.errors.APIError):
        RetryingEngine(api, 5).kill("c")
    assert api.calls == ["kill"]


def test_past_the_budget_the_engines_error_is_raised_as_it_came() -> None:
    api = FakeApi(inspect_container=[api_error(500, "disk full")] * 1000)
    api.containers_made["c"] = {}
    lines: list[str] = []
    with to_run_log(lines.append), pytest.raises(docker.errors.APIError, match="disk full"):
        RetryingEngine(api, 0.2).inspect_container("c")
    assert "giving up" in lines[-1] and "disk full" in lines[-1]
