"""A bad PIER_* setting stops start-up with one line per bad setting naming
the variable, the value given and what is allowed (no traceback, no field
names); a PIER_* variable pier does not know is warned about with the closest
name it does."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pier.errors import ConfigurationError
from pier.settings import Settings, get_settings, load_settings
from pier.settings.environment import unknown_variables

PIER = str(Path(sys.executable).parent / "pier")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    return {**env, "PIER_HOME": str(home), "PIER_RESIDENT": "0", **extra}


def test_pier_serve_with_bad_settings_says_one_line_each_and_no_traceback(tmp_path):
    env = clean_env(tmp_path, PIER_MAX_CPUS="lots", PIER_DEFAULT_TIMEOUT_SEC="0",
                    PIER_WARM_POOL="[{bad", PIER_ADMIN_TOKEN="x")  # fmt: skip
    done = subprocess.run([PIER, "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: PIER_")]
    assert len(lines) == 3, done.stderr
    by_name = {line.split("=", 1)[0].removeprefix("error: "): line for line in lines}
    assert "'lots'" in by_name["PIER_MAX_CPUS"] and "valid number" in by_name["PIER_MAX_CPUS"]
    assert "'0'" in by_name["PIER_DEFAULT_TIMEOUT_SEC"]
    assert "greater than or equal to 1" in by_name["PIER_DEFAULT_TIMEOUT_SEC"]
    assert "'[{bad'" in by_name["PIER_WARM_POOL"] and "JSON" in by_name["PIER_WARM_POOL"]
    assert len(done.stderr.splitlines()) <= 5, done.stderr  # the lines, a hint: not a page of pydantic
    assert "max_cpus" not in done.stderr  # the variable, never the field


def test_a_secret_given_badly_is_not_echoed(monkeypatch):
    monkeypatch.setenv("PIER_TRIAL_KEYS", '{"ANTHROPIC_API_KEY": sk-live-not-json')
    with pytest.raises(ConfigurationError) as bad:
        load_settings()
    assert "sk-live" not in str(bad.value)
    assert bad.value.lines[0].startswith("PIER_TRIAL_KEYS='***' is not allowed")
    assert os.environ["PIER_TRIAL_KEYS"].startswith('{"ANTHROPIC')  # set aside while read, then put back


def test_settings_that_validate_raise_nothing(monkeypatch):
    monkeypatch.setenv("PIER_MAX_CPUS", "8")
    assert load_settings().max_cpus == 8


def test_a_misspelt_variable_is_warned_with_the_closest_name(monkeypatch, caplog, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIER_MAX_CPU", "3")
    monkeypatch.setenv("PIER_EXECUTER", "temporal")
    monkeypatch.setenv("PIER_TEST_ANYTHING", "1")  # the suite's own: not warned
    get_settings.cache_clear()
    with caplog.at_level(logging.WARNING, logger="pier.settings"):
        get_settings()
    get_settings.cache_clear()
    warned = [r.getMessage() for r in caplog.records if r.name == "pier.settings"]
    assert "PIER_MAX_CPU is not a pier setting and is ignored: did you mean PIER_MAX_CPUS?" in warned
    assert "PIER_EXECUTER is not a pier setting and is ignored: did you mean PIER_EXECUTOR?" in warned
    assert not any("PIER_TEST_ANYTHING" in w for w in warned)


def test_a_misspelt_variable_in_dot_env_is_warned_too(monkeypatch, caplog, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("PIER_SANDBOX_RUNTIM=runsc\n")
    get_settings.cache_clear()
    with caplog.at_level(logging.WARNING, logger="pier.settings"):
        get_settings()
    get_settings.cache_clear()
    assert any("did you mean PIER_SANDBOX_RUNTIME?" in r.getMessage() for r in caplog.records)


def test_every_setting_and_pier_s_own_variables_are_known():
    names = [f"PIER_{name.upper()}" for name in Settings.model_fields] + [
        "PIER_RESIDENT",
        "PIER_RESIDENT_DIR",
    ]
    assert unknown_variables(Settings, names) == []
    assert unknown_variables(Settings, ["PIER_ZZZZ"]) == [
        "PIER_ZZZZ is not a pier setting and is ignored (docs/settings.md lists every setting)"
    ]


def test_the_cli_warns_a_misspelt_variable(tmp_path):
    env = clean_env(tmp_path, PIER_DEFAULT_TIMEOUT="60")
    done = subprocess.run([PIER, "runs"], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "PIER_DEFAULT_TIMEOUT is not a pier setting and is ignored: did you mean PIER_DEFAULT_TIMEOUT_SEC?"
        in (done.stderr)
    )
