import subprocess

from pier.agents import CLI_AGENTS, get_agent
from pier.agents.install import InstallSpec, install_script
from pier.agents.node import node_install_script
from pier.agents.pins import PINS
from pier.sandbox.base import ExecResult, Limits, SandboxSpec
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine, FakeSandbox, Script


def test_every_cli_agent_installs_from_its_pin():
    for name in CLI_AGENTS:
        spec = get_agent(name).install_spec
        assert spec.pin is PINS[name]
        script = install_script(spec)
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0, name
        assert spec.pin.version in script


def test_npm_script_installs_node_when_missing_or_old():
    script = install_script(get_agent("claude-code").install_spec)
    assert '[ "$node_major" -lt 22 ]' in script
    assert "node-linux-$arch/-/node-linux-$arch-$node_version.tgz" in script
    assert "--allow-scripts=@anthropic-ai/claude-code @anthropic-ai/claude-code@2.1.332" in script


def test_node_step_is_the_snapshot_recipes():
    script = node_install_script()
    assert "sha512sum -c -" in script and "node_version=22." in script
    assert script.endswith("export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false")


def test_python_cli_installs_in_its_own_venv():
    script = install_script(get_agent("hermes").install_spec)
    assert "'hermes-agent[mcp]==0.19.0'" in script and "/opt/pier-agents/hermes" in script
    assert "node" not in script


def test_version_match_is_a_whole_token(tmp_path):
    """2.1.33 must not pass for 2.1.332, and `v0.19.0` must pass for 0.19.0."""
    fake = tmp_path / "fakecli"
    spec = InstallSpec("fake", PINS["hermes"], str(fake))
    probe = install_script(spec).split("\nif at_pin")[0] + "\nat_pin && echo yes || echo no\n"
    for printed, expected in (("Hermes Agent v0.19.0 (x)", "yes"), ("0.19.01", "no"), ("10.19.0", "no")):
        fake.write_text(f"#!/bin/sh\necho '{printed}'\n")
        fake.chmod(0o755)
        assert (
            subprocess.run(["bash", "-c", probe], capture_output=True, text=True).stdout.strip() == expected
        )


def sandbox_answering(result: ExecResult) -> FakeSandbox:
    """A sandbox of the shared fake whose every command gives `result`, its output
    streamed line by line as a real one's is."""
    backend = FakeBackend(engine=FakeEngine(), program=Script(otherwise=result))
    return backend.create(SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels={}))


def test_install_failure_names_agent_version_and_last_lines():
    import pytest

    from pier.agents.install import run_install
    from pier.errors import StageError

    lines = [f"line {n}" for n in range(40)] + ["npm error notarget No matching version found"]
    sandbox = sandbox_answering(ExecResult(1, "\n".join(lines), 3.0))
    with pytest.raises(StageError) as caught:
        run_install(sandbox, get_agent("codex").install_spec, lambda _: None, timeout=600)
    message = caught.value.message
    assert "installing codex 0.171.0 (@openai/codex@0.171.0 from npm) failed (exit 1)" in message
    assert "No matching version found" in message and "line 39" in message and "line 10\n" not in message
    timed_out = sandbox_answering(ExecResult(137, "added 1 package", 600.0, timed_out=True))
    with pytest.raises(StageError, match="took over 600s and was stopped"):
        run_install(timed_out, get_agent("codex").install_spec, lambda _: None, timeout=600)


def test_a_recipe_step_that_fails_stops_itself_even_inside_an_or_list():
    """The installers run a recipe's steps as `steps || fallback`. In a `( ... )`
    subshell there, bash ignores the step's own `set -e`: a failed download or
    checksum went on to unpack and install what it had (before: AFTER printed,
    the unverified file installed, and only a later failure reached the
    fallback). Each RUN is a shell of its own now, as in a Docker build."""
    from pier.agents.node import _instructions

    recipe = 'ENV PIER_T=1\nRUN set -eu; \\\n    test "$PIER_T" = 1; false; echo AFTER\nRUN echo SECOND\n'
    script = " &&\n".join(_instructions(recipe, "test.Dockerfile"))
    done = subprocess.run(["bash", "-c", f"{{ {script}; }} || echo FALLBACK"], capture_output=True, text=True)
    assert done.stdout.split() == ["FALLBACK"], done.stdout
    ok = recipe.replace("false; ", "")
    done = subprocess.run(
        ["bash", "-c", " &&\n".join(_instructions(ok, "t"))], capture_output=True, text=True
    )
    assert done.stdout.split() == ["AFTER", "SECOND"], (done.stdout, done.stderr)
