"""Each call to the sandbox is a round trip to the engine: set up sends one
archive (folders, attached files and the agent's files) and one probe exec (the
sandbox's tools and the checks' together), and collect reads its folders one after
another. Counted on the fake backend, through the real lifecycle."""

from __future__ import annotations

import pytest

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.fake import FakeBackend, FakeEngine, FakeSandbox, Script, replied
from pier.settings import Settings
from pier.tasks import task_from_runbook

RUNBOOK = """---
agent: script
checks:
  - name: out-written
    type: file_exists
    path: out.txt
---
```bash
echo hello > /app/results/out.txt
```
"""


def write_results(sandbox, call):
    sandbox.put_files("/app/results", {"out.txt": b"hello\n"})


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str]]:
    """Every put_archive ("put", folder), exec ("exec", command) and exec_stdout
    ("stdout", command), in order."""
    seen: list[tuple[str, str]] = []
    put, exec_, stdout = FakeSandbox.put_archive, FakeSandbox.exec, FakeSandbox.exec_stdout

    def counting_put(self, dest_dir, tar_bytes):
        seen.append(("put", dest_dir))
        return put(self, dest_dir, tar_bytes)

    def counting_exec(self, command, **kwargs):
        seen.append(("exec", command if isinstance(command, str) else " ".join(command)))
        return exec_(self, command, **kwargs)

    def counting_stdout(self, argv, **kwargs):
        seen.append(("stdout", " ".join(argv)))
        return stdout(self, argv, **kwargs)

    monkeypatch.setattr(FakeSandbox, "put_archive", counting_put)
    monkeypatch.setattr(FakeSandbox, "exec", counting_exec)
    monkeypatch.setattr(FakeSandbox, "exec_stdout", counting_stdout)
    return seen


def start(tmp_path, monkeypatch, script: Script, services: Services | None = None):
    services = services or new_services(tmp_path, monkeypatch, script)
    attachment = tmp_path / "data.txt"
    attachment.write_text("rows\n")
    request = RunRequest(
        collection="tests",
        task_name="t",
        task=task_from_runbook(parse(RUNBOOK)),
        run_params={"file_paths": [str(attachment)]},
    )
    return run(services, request)


def new_services(tmp_path, monkeypatch, script: Script) -> Services:
    """Services with a backend of their own (one per Services, as in a server)."""
    monkeypatch.setattr("pier.sandbox._registered", {})
    engine = FakeEngine()
    register_backend("fake-trips", lambda settings: FakeBackend(settings, engine=engine, program=script))
    return Services(Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-trips"))


def probes(calls: list[tuple[str, str]]) -> int:
    return sum(1 for kind, text in calls if kind == "exec" and "command -v" in text)


def test_a_second_sandbox_of_the_same_image_is_not_probed_again(tmp_path, monkeypatch, calls):
    script = Script().on(r"script\.sh", write_results)
    services = new_services(tmp_path, monkeypatch, script)
    for _ in range(2):
        record = start(tmp_path, monkeypatch, script, services)
        assert record.status == RunStatus.completed, record.error
    assert probes(calls) == 1
    # Another backend knows nothing of that image's tools: it probes.
    record = start(tmp_path, monkeypatch, script, new_services(tmp_path, monkeypatch, script))
    assert record.status == RunStatus.completed, record.error
    assert probes(calls) == 2


def test_a_probe_that_found_a_tool_missing_is_not_remembered_as_passing(tmp_path, monkeypatch, calls):
    script = Script().on(r"command -v", replied("python3\n")).on(r"script\.sh", write_results)
    services = new_services(tmp_path, monkeypatch, script)
    for _ in range(2):
        record = start(tmp_path, monkeypatch, script, services)
        assert record.status == RunStatus.failed and "python3" in (record.error or "")
    assert probes(calls) == 2


def test_set_up_sends_one_archive_and_one_probe(tmp_path, monkeypatch, calls):
    record = start(tmp_path, monkeypatch, Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.completed, record.error
    agent = next(i for i, (kind, text) in enumerate(calls) if kind == "exec" and "script.sh" in text)
    before_agent = calls[:agent]
    assert [kind for kind, _ in before_agent] == ["put", "exec"], before_agent
    assert before_agent[0] == ("put", "/")
    assert "python3" in before_agent[1][1], "the checks' tools are probed in the same exec"


def test_the_one_archive_holds_folders_assets_and_the_agent_script(tmp_path, monkeypatch):
    seen: dict[str, bool] = {}

    def look(sandbox, call):
        for path in ("/app/assets/data.txt", "/run/pier/script.sh", "/app/results", "/logs/agent"):
            seen[path] = sandbox.host_path(path).exists()
        write_results(sandbox, call)

    record = start(tmp_path, monkeypatch, Script().on(r"script\.sh", look))
    assert record.status == RunStatus.completed, record.error
    assert seen and all(seen.values()), seen


def test_collect_reads_one_archive_at_a_time(tmp_path, monkeypatch):
    """The engine keeps a container locked while an archive of it is read, so a
    collect that asks for its folders together hangs for ever once a folder
    outgrows the socket's buffers. The fake refuses a second archive while one is
    open, and collect still brings all three folders out."""
    asked: list[str] = []
    original = FakeSandbox.get_archive

    def counted(self, path):
        asked.append(path)
        return original(self, path)

    monkeypatch.setattr(FakeSandbox, "get_archive", counted)
    record = start(tmp_path, monkeypatch, Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.completed, record.error
    assert [f.path for f in record.outputs.results_files] == ["out.txt"]
    assert asked == ["/logs/agent", "/app/results", "/app/assets"]


def test_collect_looks_inside_the_sandbox_and_reads_it_with_one_exec(tmp_path, monkeypatch, calls):
    """The outputs' size (for the scratch disk's room), their sockets and fifos
    (which the engine's archives leave out) and, where the sandbox has tar, the
    folders themselves come from one exec, not one each: an exec is three round
    trips, and under a burst collect waits on the engine."""
    record = start(tmp_path, monkeypatch, Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.completed, record.error
    looks = [
        (kind, text) for kind, text in calls if "du -sb" in text or "-printf" in text or "tar -c" in text
    ]
    assert len(looks) == 1 and looks[0][0] == "stdout", looks
    assert "du -sb" in looks[0][1] and "-type s" in looks[0][1] and "exec tar -c" in looks[0][1]
