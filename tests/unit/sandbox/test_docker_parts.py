"""The Docker backend's pure parts, and its verbs against a fake engine client."""

from __future__ import annotations

import tarfile
import threading
import time
from collections import Counter
from functools import partial

import docker.errors
import pytest

from pier.errors import CapabilityError, ImageError, InputError
from pier.sandbox.base import LABEL_CREATED, LABEL_OWNER, LABEL_RUN, Limits, SandboxSource, SandboxSpec
from pier.sandbox.docker import execs, images
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.client import EngineFacts, engine_facts
from pier.sandbox.docker.containers import hostname_for, parse_size, plan_container
from pier.sandbox.docker.execs import MARKER_VAR, OutputCollector, Watchdog, exec_argv
from pier.sandbox.docker.streams import iterate_until
from pier.sandbox.dockerfile import recipe_tag
from pier.settings import Settings

EXT4 = EngineFacts(ncpu=2, storage_driver="overlay2", backing_fs="extfs")
XFS = EngineFacts(ncpu=8, storage_driver="overlay2", backing_fs="xfs")


def spec(**limits: object) -> SandboxSpec:
    return SandboxSpec(
        image="pier-base:bookworm",
        limits=Limits(**limits),  # type: ignore[arg-type]
        labels={LABEL_RUN: "Run_42"},
        env={"A": "1"},
    )


# --- containers -------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "expected"),
    [("8G", 8 << 30), ("512m", 512 << 20), ("1.5GiB", 3 << 29), ("64MB", 64 << 20), ("1024", 1024), (7, 7)],
)
def test_parse_size(size, expected):
    assert parse_size(size) == expected


@pytest.mark.parametrize("size", ["", "lots", "8 X", "-1G"])
def test_parse_size_rejects_nonsense(size):
    with pytest.raises(InputError, match=repr(size)):
        parse_size(size)


def test_hostname_names_the_run():
    assert hostname_for("Run_42") == "pier-run-42"
    assert hostname_for(None) == "pier-sandbox"
    assert len(hostname_for("x" * 200)) == 63


def test_plan_sets_limits_keepalive_and_labels():
    plan = plan_container(spec(cpus=1.5, memory="64m", pids=100), EXT4, owner="h:1:2", now=1000.0)
    host, create = plan.host, plan.create
    assert host["init"] is True
    assert host["nano_cpus"] == 1_500_000_000
    assert host["mem_limit"] == host["memswap_limit"] == 64 << 20
    assert host["pids_limit"] == 100
    assert "binds" not in host, "a spec names no host path: nothing is bind-mounted"
    assert "network_mode" not in host
    # the keep-alive (takes the first archive on its stdin, then sleeps), stdin open for it
    assert create["entrypoint"][:2] == ["sh", "-c"] and "exec sleep infinity" in create["entrypoint"][2]
    assert create["entrypoint"][-1] == "/" and create["command"] is None and create["stdin_open"] is True
    assert create["working_dir"] == "/app" and create["user"] == "0"
    assert create["hostname"] == "pier-run-42"
    assert create["labels"] == {LABEL_RUN: "Run_42", LABEL_OWNER: "h:1:2", LABEL_CREATED: "1000"}
    assert create["environment"] == {"A": "1"}


def test_plan_clamps_cpus_to_the_engine():
    assert plan_container(spec(cpus=4), EXT4, owner="o").host["nano_cpus"] == 2_000_000_000


def test_plan_turns_the_network_off():
    assert plan_container(spec(network=False), EXT4, owner="o").host["network_mode"] == "none"


def test_plan_sets_a_disk_limit_only_where_the_storage_driver_can():
    assert "storage_opt" not in plan_container(spec(disk="10G"), EXT4, owner="o").host
    assert plan_container(spec(disk="10G"), XFS, owner="o").host["storage_opt"] == {"size": "10G"}
    assert "storage_opt" not in plan_container(spec(disk=None), XFS, owner="o").host


def test_plan_env_wins_over_backend_env():
    plan = plan_container(spec(), EXT4, owner="o", extra_env={"A": "0", "SSL_CERT_FILE": "/x"})
    assert plan.create["environment"] == {"A": "1", "SSL_CERT_FILE": "/x"}


def test_engine_facts_from_info():
    info = {"NCPU": 2, "Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"]]}
    facts = engine_facts(info)
    assert facts == EXT4 and not facts.disk_quota
    assert XFS.disk_quota and EngineFacts(1, "btrfs", None).disk_quota


# --- execs ------------------------------------------------------------------


def test_exec_argv_wraps_strings_in_bash_and_everything_in_timeout():
    argv = exec_argv("echo hi", env=None, clean_env=False, timeout=None)
    assert argv[:4] == ["timeout", "-s", "KILL", "0"]
    assert argv[-3:] == ["bash", "-c", "echo hi"]
    assert exec_argv(["ls", "-l"], env=None, clean_env=False, timeout=2.5)[3:4] == ["2.5"]
    assert exec_argv(["ls"], env=None, clean_env=False, timeout=0)[3] == "0.1"  # 0 would mean never


def test_exec_argv_clean_env_starts_from_nothing():
    argv = exec_argv(["python3"], env={"K": "v"}, clean_env=True, timeout=10)
    start = argv.index("env")
    assert argv[start : start + 2] == ["env", "-i"]
    assert "HOME=/root" in argv and "K=v" in argv and argv[-1] == "python3"
    assert argv.index("K=v") < argv.index("python3")
    assert execs.exec_environment({"K": "v"}, True, "m") == {MARKER_VAR: "m"}
    assert execs.exec_environment({"K": "v"}, False, "m") == {"K": "v", MARKER_VAR: "m"}


def test_collector_splits_lines_across_chunks_and_utf8_boundaries():
    lines: list[str] = []
    collector = OutputCollector(lines.append)
    snow = "☃".encode()
    for chunk in [b"one\r\ntw", b"o\n" + snow[:1], snow[1:] + b"\nlast"]:
        collector.feed(chunk)
    assert lines == ["one", "two", "☃"]
    assert collector.finish() == "one\r\ntwo\n☃\nlast"
    assert lines == ["one", "two", "☃", "last"]


def test_collector_replaces_invalid_utf8():
    collector = OutputCollector(None)
    collector.feed(b"bad \xff byte\n")
    assert collector.finish() == "bad \ufffd byte\n"


def test_collector_keeps_the_last_part_of_long_output():
    collector = OutputCollector(None, limit=100)
    for i in range(1000):
        collector.feed(f"{i:09d}\n".encode())
    output = collector.finish()
    assert output.startswith("[... 9900 characters of earlier output dropped ...]\n")
    assert output.endswith("000000999\n") and len(output.split("]\n", 1)[1]) == 100


def test_collector_passes_on_a_huge_line_in_pieces():
    lines: list[str] = []
    collector = OutputCollector(lines.append)
    collector.feed(b"x" * (execs.MAX_LINE_CHARS + 10))
    collector.feed(b"y\n")
    collector.finish()
    assert lines == ["x" * (execs.MAX_LINE_CHARS + 10), "y"]


def test_watchdog_kills_then_closes(monkeypatch):
    monkeypatch.setattr(execs, "KILL_GRACE_S", 0.05)
    monkeypatch.setattr(execs, "CLOSE_GRACE_S", 0.05)
    calls: list[tuple[str, float]] = []
    closed = threading.Event()
    started = time.monotonic()
    kill = lambda: calls.append(("kill", time.monotonic() - started))  # noqa: E731

    def close() -> None:
        calls.append(("close", time.monotonic() - started))
        closed.set()

    watchdog = Watchdog(0.1, kill=kill, close=close).start()
    assert closed.wait(30), "the watchdog never closed the stream"
    assert watchdog.fired and [name for name, _ in calls] == ["kill", "close"]
    assert 0.15 <= calls[0][1] < calls[1][1], "kill comes after timeout + grace, close after kill"


def test_watchdog_does_nothing_when_stopped_in_time_or_without_timeout(monkeypatch):
    monkeypatch.setattr(execs, "KILL_GRACE_S", 0.05)
    monkeypatch.setattr(execs, "CLOSE_GRACE_S", 0.05)
    calls: list[str] = []
    stopped = Watchdog(0.1, kill=lambda: calls.append("kill"), close=lambda: calls.append("close")).start()
    stopped.stop()
    Watchdog(None, kill=lambda: calls.append("kill"), close=lambda: calls.append("close")).start()
    # A control with the same timeout, started later: once it has fired and
    # closed, the stopped one would have fired too.
    closed = threading.Event()
    control = Watchdog(0.1, kill=lambda: None, close=closed.set).start()
    assert closed.wait(30) and control.fired
    assert calls == [] and not stopped.fired


# --- streams ----------------------------------------------------------------


def test_iterate_until_passes_items_and_errors_through():
    assert list(iterate_until(lambda: iter([1, 2, 3]), time.monotonic() + 5)) == [1, 2, 3]

    def broken():
        yield 1
        raise docker.errors.APIError("boom")

    with pytest.raises(docker.errors.APIError):
        list(iterate_until(broken, time.monotonic() + 5))


def test_iterate_until_stops_at_the_deadline_of_a_silent_stream():
    never = threading.Event()

    def silent():
        yield "first"
        never.wait(120)

    seen = []
    with pytest.raises(TimeoutError):
        for item in iterate_until(silent, time.monotonic() + 0.3):
            seen.append(item)
    assert seen == ["first"]  # a deadline ignored would wait out the stream: no TimeoutError
    never.set()


# --- images -----------------------------------------------------------------


class FakeImagesApi:
    def __init__(self, present=(), build_events=(), pull_error=None):
        self.present = set(present)
        self.build_events = list(build_events)
        self.pull_error = pull_error
        self.builds: list[dict] = []

    def inspect_image(self, ref):
        if ref not in self.present:
            raise docker.errors.ImageNotFound(f"no such image: {ref}")
        return {"Id": ref}

    def build(self, **kwargs):
        self.builds.append(kwargs)
        if not any("error" in event for event in self.build_events):
            self.present.add(kwargs["tag"])
        return iter(self.build_events)

    def pull(self, ref, stream, decode, auth_config):
        assert auth_config == {}, "pulls must not use the host's registry logins"
        if self.pull_error:
            raise self.pull_error
        self.present.add(ref)
        return iter([{"status": "Pulling fs layer", "id": "abc"}, {"status": "Downloading", "id": "abc"}])


GENERATED = SandboxSource(kind="dockerfile", name="generated", dockerfile="FROM x\n")


def test_a_present_image_is_used_as_it_is():
    api = FakeImagesApi(present={"acme/env:1"})
    lines: list[str] = []
    source = SandboxSource(kind="image", name="acme/env:1", image="acme/env:1")
    assert images.ensure_image(api, source, None, lines.append, 10) == "acme/env:1"
    assert lines == []


def test_an_absent_image_is_pulled_with_quiet_progress():
    api = FakeImagesApi()
    lines: list[str] = []
    source = SandboxSource(kind="image", name="acme/env:1", image="acme/env:1")
    assert images.ensure_image(api, source, None, lines.append, 10) == "acme/env:1"
    assert lines == ["Pulling image acme/env:1", "abc: Pulling fs layer"]


def test_a_failed_pull_says_to_check_docker_pull_without_login():
    api = FakeImagesApi(pull_error=docker.errors.APIError("pull access denied"))
    source = SandboxSource(kind="image", name="acme/private:1", image="acme/private:1")
    with pytest.raises(ImageError) as err:
        images.ensure_image(api, source, None, lambda _: None, 10)
    assert "`docker pull acme/private:1` works without logging in" in str(err.value)


def test_a_build_names_each_layer_by_its_pier_step_title_and_cuts_long_instructions_short():
    dockerfile = "FROM x\n# pier-step: Python 3.12 as python3\nRUN a \\\n  b\nRUN " + "y" * 400 + "\n"
    source = SandboxSource(kind="dockerfile", name="titled", dockerfile=dockerfile)
    events = [
        {"stream": f"Step {n}/3 : {line}\n"}
        for n, line in ((1, "FROM x"), (2, "RUN a b"), (3, "RUN " + "y" * 400))
    ]
    lines: list[str] = []
    images.ensure_image(FakeImagesApi(build_events=events), source, None, lines.append, 10)
    assert lines[1:] == [
        "layer 1/3: FROM x",
        "layer 2/3: Python 3.12 as python3",
        "layer 3/3: RUN " + "y" * 156 + " ...",
    ]


def test_a_recipe_builds_once_under_its_content_tag_with_labels_and_context():
    events = [{"stream": "Step 1/1 : FROM x\n"}, {"stream": "\x1b[91mpart"}, {"stream": "ial\n\x1b[0m"}]
    api = FakeImagesApi(build_events=events)
    lines: list[str] = []
    tag = images.ensure_image(api, GENERATED, b"pem", lines.append, 10)
    assert tag == recipe_tag("generated", "FROM x\n", b"pem")
    assert lines == [f"Building image {tag}", "layer 1/1: FROM x", "partial"]
    (build,) = api.builds
    assert build["labels"]["pier.recipe"] == tag.rsplit(":", 1)[1]
    assert "pier.created" in build["labels"]
    with tarfile.open(fileobj=build["fileobj"]) as context:
        assert sorted(context.getnames()) == ["Dockerfile", "pier-ca.crt"]

    lines.clear()
    assert images.ensure_image(api, GENERATED, b"pem", lines.append, 10) == tag
    assert len(api.builds) == 1 and lines == [f"Using cached image {tag}"]


def test_a_failed_build_raises_with_its_last_lines():
    events = [{"stream": "Step 2/3 : RUN false\n"}, {"error": "The command returned 1"}]
    api = FakeImagesApi(build_events=events)
    with pytest.raises(ImageError) as err:
        images.ensure_image(api, GENERATED, None, lambda _: None, 10)
    assert "The command returned 1" in str(err.value) and "RUN false" in str(err.value)


NO_HUB = (
    'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io '
    "on 10.255.255.53:53: no such host"
)


def test_a_build_without_docker_hub_points_at_the_local_base_image_settings():
    api = FakeImagesApi(
        build_events=[{"stream": "Step 1/9 : FROM python:3.13-slim-bookworm\n"}, {"error": NO_HUB}]
    )
    with pytest.raises(ImageError) as err:
        images.ensure_image(api, GENERATED, None, lambda _: None, 10)
    message = str(err.value)
    assert NO_HUB in message
    assert "PIER_BASE_IMAGE=pier-base:bookworm" in message and "PIER_SNAPSHOT_BASE_IMAGE" in message
    assert "scripts/build-test-image.sh" in message and "README" in message


def test_a_pull_without_docker_hub_points_at_the_local_base_image_settings():
    api = FakeImagesApi(pull_error=docker.errors.APIError(NO_HUB))
    source = SandboxSource(kind="image", name="acme/env:1", image="acme/env:1")
    with pytest.raises(ImageError) as err:
        images.ensure_image(api, source, None, lambda _: None, 10)
    assert "PIER_BASE_IMAGE" in str(err.value) and "--image" in str(err.value)


def test_a_build_that_fails_for_its_own_reasons_gets_no_registry_hint():
    api = FakeImagesApi(
        build_events=[{"error": "The command '/bin/sh -c false' returned a non-zero code: 1"}]
    )
    with pytest.raises(ImageError) as err:
        images.ensure_image(api, GENERATED, None, lambda _: None, 10)
    assert "PIER_BASE_IMAGE" not in str(err.value)


def test_applied_limits_say_what_the_engine_changed():
    from pier.sandbox.docker.backend import applied_limits

    wanted = spec(cpus=4, memory="1g", pids=10)
    applied, notes = applied_limits(wanted, plan_container(wanted, EXT4, owner="o"), EXT4)
    assert applied.cpus == 2 and applied.disk is None
    assert notes == ("cpus 4 lowered to 2: the Docker engine has 2 CPU(s)",)
    guarded, _ = applied_limits(wanted, plan_container(wanted, EXT4, owner="o"), EXT4, guarded=True)
    assert guarded.disk == wanted.limits.disk
    small = spec(cpus=1, memory="1g", pids=10)
    applied, notes = applied_limits(small, plan_container(small, XFS, owner="o"), XFS)
    assert applied.cpus == 1 and notes == ()


# --- capabilities -------------------------------------------------------------


class NoCallsEngine:
    """An engine client that fails the test if anything reaches it."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the engine was called ({name}) for a spec that must be refused first")


def backend_on(facts: EngineFacts) -> DockerBackend:
    backend = DockerBackend(Settings(ca_bundle=None), api=NoCallsEngine())  # type: ignore[arg-type]
    backend.__dict__["facts"] = facts
    return backend


@pytest.mark.parametrize(
    ("limits", "capability"), [({"gpus": 1}, "gpus"), ({"egress": ("pypi.org",)}, "egress_allowlist")]
)
def test_docker_refuses_what_it_cannot_do_before_touching_the_engine(limits, capability):
    with pytest.raises(CapabilityError, match=rf"capability {capability}.*'docker'"):
        backend_on(EXT4).create(spec(disk=None, **limits))


def test_a_disk_limit_nothing_here_can_enforce_is_refused_saying_why():
    """Only noting it let one run fill the host's disk."""
    with pytest.raises(
        CapabilityError, match=r"disk limit of 10G \(capability disk_quota\).*'docker'.*not visible"
    ):
        backend_on(EXT4).create(spec(disk="10G"))


def test_docker_declares_disk_quota_by_the_drivers_quota_or_the_disk_guard():
    assert not backend_on(EXT4).capabilities.disk_quota and backend_on(XFS).capabilities.disk_quota
    assert backend_on(EXT4).capabilities.declared() == (
        "network_off",
        "memory_limit",
        "cpu_limit",
        "pids_limit",
        "volumes",
    )
    guarded = backend_on(EXT4)
    guarded.__dict__["disk_guard_missing"] = None
    assert guarded.capabilities.disk_quota


class RecordingApi:
    """Just enough of docker.APIClient for DockerSandbox's archive calls."""

    def __init__(self):
        self.puts: list[tuple[str, bytes]] = []

    def put_archive(self, container, path, data):
        self.puts.append((path, data if isinstance(data, bytes) else b"".join(data)))
        return True


def names_in(data: bytes) -> list[str]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getnames()


def test_create_time_files_ride_in_front_of_the_first_archive_to_the_root():
    from pier.sandbox.docker.sandbox import DockerSandbox
    from pier.sandbox.tarutil import tar_of_files

    api = RecordingApi()
    sandbox = DockerSandbox(api, "c" * 64, "unix://test")  # type: ignore[arg-type]
    sandbox.defer_files({"/etc/pier/ca-bundle.crt": b"CA"})
    assert api.puts == [], "nothing is sent at create"
    sandbox.put_archive("/", iter([tar_of_files({"run/pier/script.sh": b"echo"})]))
    assert [path for path, _ in api.puts] == ["/"], "one round trip for both"
    assert names_in(api.puts[0][1]) == ["etc/pier/ca-bundle.crt", "run/pier/script.sh"]
    sandbox.put_archive("/", tar_of_files({"app/x": b"x"}))
    assert names_in(api.puts[1][1]) == ["app/x"], "sent once only"


def test_create_time_files_are_in_place_before_anything_could_read_them(monkeypatch):
    from pier.sandbox.docker import sandbox as module

    api = RecordingApi()
    box = module.DockerSandbox(api, "c" * 64, "unix://test")  # type: ignore[arg-type]
    box.defer_files({"/etc/pier/ca-bundle.crt": b"CA"})
    order: list[str] = []
    monkeypatch.setattr(
        module, "run_exec", lambda *a, **k: order.append(f"exec after {len(api.puts)} put(s)")
    )
    box.exec("true")
    assert order == ["exec after 1 put(s)"] and names_in(api.puts[0][1]) == ["etc/pier/ca-bundle.crt"]


def test_docker_owns_the_ca_environment_of_its_sandboxes(tmp_path):
    """The checks' clean shell gets its TLS variables from the backend that
    installed the bundle, not from the lifecycle reading the Docker recipe."""
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    with_ca = DockerBackend(Settings(ca_bundle=bundle), api=NoCallsEngine())  # type: ignore[arg-type]
    assert set(with_ca.tls_env().values()) == {"/etc/pier/ca-bundle.crt"}
    assert "SSL_CERT_FILE" in with_ca.tls_env()
    assert DockerBackend(Settings(ca_bundle=None), api=NoCallsEngine()).tls_env() == {}  # type: ignore[arg-type]


class StoppedUnderAnExec:
    """An engine whose container stopped while an exec still says it runs (the
    engine then keeps the exec's stream open for ever)."""

    def exec_inspect(self, exec_id):
        return {"Running": True, "ContainerID": "c1"}

    def inspect_container(self, container_id):
        return {"State": {"Running": False, "Status": "exited"}}


def test_an_exec_whose_sandbox_stopped_counts_as_ended():
    assert execs.exec_exited(StoppedUnderAnExec(), "e1")  # type: ignore[arg-type]


class RemovedUnderAnExec:
    """An engine whose container was removed while an exec read its stream (gVisor's
    runtime then keeps the stream open for ever)."""

    def exec_inspect(self, exec_id):
        raise docker.errors.NotFound("No such exec instance")


def test_an_exec_whose_sandbox_was_removed_counts_as_ended():
    assert execs.exec_exited(RemovedUnderAnExec(), "e1")  # type: ignore[arg-type]


def test_the_exit_watch_asks_again_after_an_engine_error_and_closes_a_removed_sandboxs_stream(monkeypatch):
    """An inspect that fails is asked again rather than given up on: giving up left
    the stream of a removed gVisor sandbox open, and its run hung."""
    monkeypatch.setattr(execs, "CLOSE_GRACE_S", 0.05)
    monkeypatch.setattr(execs.ExitWatch, "FIRST_POLL_S", 0.01)
    monkeypatch.setattr(execs.ExitWatch, "MAX_POLL_S", 0.02)
    monkeypatch.setattr(execs.ExitWatch, "SETTLE_S", 0.01)
    answers = iter([ConnectionError("engine busy"), False, True])

    def exited(_sandbox_too: bool) -> bool:
        answer = next(answers, True)
        if isinstance(answer, Exception):
            raise answer
        return answer

    closed = threading.Event()
    calls: list[str] = []
    watch = execs.ExitWatch(exited, kill=lambda: calls.append("kill"), close=closed.set).start()
    assert closed.wait(5), "the stream was never closed"
    watch.stop()
    assert calls == ["kill"] and watch.fired


def test_the_exit_watch_kills_nothing_when_the_output_ends_just_after_the_process(monkeypatch):
    """On a loaded machine the engine can report the process gone before the
    reader has seen the output end: a kill then cost an exec of its own (5 of
    40 runs of a 32-slot burst). The output that ends within SETTLE_S is left
    alone; one still open after it is held by leftovers, which are killed."""
    monkeypatch.setattr(execs.ExitWatch, "FIRST_POLL_S", 0.01)
    calls: list[str] = []
    watch = execs.ExitWatch(lambda _sandbox_too: True, kill=lambda: calls.append("kill"), close=lambda: None)
    watch.start()
    time.sleep(0.1)  # polled, and exited, 0.09 s ago
    watch.stop()  # the reader reached the output's end
    time.sleep(0.5)
    assert calls == [] and not watch.fired

    monkeypatch.setattr(execs.ExitWatch, "SETTLE_S", 0.05, raising=False)
    monkeypatch.setattr(execs, "CLOSE_GRACE_S", 0.05)
    closed = threading.Event()
    watch = execs.ExitWatch(lambda _sandbox_too: True, kill=lambda: calls.append("kill"), close=closed.set)
    assert watch.start() and closed.wait(5)
    assert calls == ["kill"] and watch.fired


class CountingEngine:
    """An exec that runs for its first `running` inspects; counts the round trips."""

    def __init__(self, running: int):
        self.running, self.calls = running, Counter()

    def exec_inspect(self, exec_id):
        self.calls["exec"] += 1
        return {"Running": self.calls["exec"] <= self.running, "ContainerID": "c1"}

    def inspect_container(self, container_id):
        self.calls["container"] += 1
        return {"State": {"Running": True}}


def test_the_exit_watch_asks_about_the_sandbox_only_once_its_polls_are_slow(monkeypatch):
    """A short command's polls are one round trip each; the sandbox's state (a
    second round trip) is asked once the polls are at their slowest."""
    monkeypatch.setattr(execs.ExitWatch, "FIRST_POLL_S", 0.01)
    monkeypatch.setattr(execs.ExitWatch, "MAX_POLL_S", 0.04)
    monkeypatch.setattr(execs.ExitWatch, "SETTLE_S", 0.01, raising=False)
    monkeypatch.setattr(execs, "CLOSE_GRACE_S", 0.01)
    engine = CountingEngine(running=5)  # polls at 0.01, 0.02, 0.04, 0.04, 0.04 s: two slow ones
    closed = threading.Event()
    watch = execs.ExitWatch(partial(execs.exec_exited, engine, "e1"), kill=lambda: None, close=closed.set)
    assert watch.start() and closed.wait(5)
    assert engine.calls == Counter(exec=6, container=3)


def test_the_disk_guard_says_why_it_cannot_be_installed(tmp_path, monkeypatch):
    from pier.sandbox.docker.diskguard import guard_available

    assert (
        guard_available("/var/lib/docker", engine_is_local=False)
        == "the Docker engine is not on this machine"
    )
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert guard_available("/var/lib/docker", engine_is_local=True) == "pier does not run as root"
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert "is not visible from here" in str(guard_available(str(tmp_path), engine_is_local=True))
    (tmp_path / "overlay2").mkdir()
    monkeypatch.setattr("shutil.which", lambda tool: f"/sbin/{tool}")
    assert guard_available(str(tmp_path), engine_is_local=True) is None


def test_gvisor_gets_a_process_ceiling_far_above_the_asked_one_and_a_note():
    backend = backend_on(
        EngineFacts(ncpu=2, storage_driver="overlay2", backing_fs="extfs", runtimes=("runsc",))
    )
    backend._settings = Settings(ca_bundle=None, sandbox_runtime="runsc")
    backend.__dict__.pop("hardening", None)
    assert not backend.capabilities.pids_limit


# --- volumes ------------------------------------------------------------------


class VolumesApi:
    """Just enough of docker.APIClient for list_volumes: the engine's answer
    to `volumes` and `containers`, each container's Mounts as Docker gives them."""

    def __init__(self, volumes: list[dict], containers: list[dict]):
        self._volumes, self._containers = volumes, containers
        self.filters: list[dict] = []

    def volumes(self, filters: dict) -> dict:
        self.filters.append(filters)
        return {"Volumes": self._volumes}

    def containers(self, all: bool, filters: dict) -> list[dict]:
        assert all and filters == {"label": LABEL_RUN}
        return self._containers


def test_list_volumes_says_which_sandboxes_mount_each_and_where():
    """Where a volume is mounted is the Docker mount's Destination (what the
    web UI shows as "Mounted at"); another sandbox's bind mount is no volume."""
    labels = {"pier.volume.collection": "c"}
    api = VolumesApi(
        volumes=[
            {"Name": "pier-vol-a-cache", "Labels": {**labels, "pier.volume": "cache"}, "CreatedAt": "2026-12-01"},
            {"Name": "pier-vol-a-data", "Labels": {**labels, "pier.volume": "data"}},
        ],
        containers=[
            {"Mounts": [{"Type": "volume", "Name": "pier-vol-a-cache", "Destination": "/root/.cache"},
                        {"Type": "bind", "Name": "pier-vol-a-data", "Destination": "/bound"}]},
            {"Mounts": [{"Type": "volume", "Name": "pier-vol-a-cache", "Destination": "/cache"}]},
            {"Mounts": [{"Type": "volume", "Name": "someone-elses", "Destination": "/x"}]},
        ],
    )  # fmt: skip
    backend = DockerBackend(Settings(ca_bundle=None), api=api)  # type: ignore[arg-type]
    found = {v.name: v for v in backend.list_volumes(labels)}
    assert api.filters == [{"label": ["pier.volume.collection=c"]}]
    assert found["pier-vol-a-cache"].in_use == 2 and found["pier-vol-a-cache"].paths == (
        "/cache",
        "/root/.cache",
    )
    assert found["pier-vol-a-cache"].created == "2026-12-01"
    assert found["pier-vol-a-data"].in_use == 0 and found["pier-vol-a-data"].paths == ()
