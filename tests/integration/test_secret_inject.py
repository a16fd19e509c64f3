"""Runbook secrets as placeholders, on a real engine: a secret marked `inject:
header` reaches its host (which sees the real value) through pier's egress
proxy, while the sandbox holds only a placeholder (probed in its environment,
every process's /proc/<pid>/environ and its files); sent to another allowed
host, the placeholder goes as it is; a secret without `inject` is as before.

The hosts are two HTTPS test servers on the Docker bridge address, each with its
own test CA, which pier trusts through PIER_CA_BUNDLE."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.model_server import bridge_gateway
from tests.support.runs import run_folder
from tests.support.tls_server import TLSServer

from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

HALVES = ("ghp_pierInjectTest", "Value0123456789abcdef")  # the value, never written whole in the sandbox
TOKEN = "".join(HALVES)
PLAIN = "plain-secret-value-42"

PROBES = r"""
```bash
set +e
out={{results_dir}}
curl -sS -m 30 -D "$out/secret_headers.txt" -H "Authorization: Bearer $GH_TOKEN" https://@SECRET_HOST@/user \
  > "$out/secret.txt" 2>&1; echo "exit=$?" >> "$out/secret.txt"
curl -sS -m 30 -u "x-access-token:$GH_TOKEN" https://@SECRET_HOST@/basic > "$out/basic.txt" 2>&1; echo "exit=$?" >> "$out/basic.txt"
curl -sS -m 30 -H "Authorization: Bearer $GH_TOKEN" https://@OTHER_HOST@/user > "$out/other.txt" 2>&1; echo "exit=$?" >> "$out/other.txt"
env > "$out/env.txt"
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done > "$out/environ.txt" 2>/dev/null
printf %s "$PLAIN_SECRET" | sha256sum > "$out/plain.txt"
# Every file (but /proc, /sys, /dev) holding the value, or the placeholder; the
# needle comes in through a pipe, so no argument or file of this probe holds it.
a='HALF_A'; b='HALF_B'
grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -f <(printf '%s\n' "$a$b") / \
  > "$out/files_value.txt"
grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -f <(printf '%s\n' "$GH_TOKEN") / \
  > "$out/files_placeholder.txt"
```
"""


@pytest.fixture
def servers(docker_backend, tmp_path: Path, monkeypatch) -> Iterator[tuple[TLSServer, TLSServer]]:
    """The secret's host and another allowed host, trusted through PIER_CA_BUNDLE."""
    bridge = bridge_gateway(docker_backend.api)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    secret = TLSServer(bridge, tmp_path / "a", echo=False).start()
    other = TLSServer(bridge, tmp_path / "b", echo=False).start()
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(secret.ca_file.read_bytes() + other.ca_file.read_bytes())
    monkeypatch.setenv("PIER_CA_BUNDLE", str(bundle))
    # Both listen on this machine's bridge address, which the operator must let runs reach.
    monkeypatch.setenv("PIER_OUTBOUND_ALLOW", f"{secret.address},{other.address}")
    get_settings.cache_clear()
    yield secret, other
    secret.stop()
    other.stop()


def test_an_injected_secret_reaches_its_host_only_and_never_the_sandbox(base_image, servers):
    secret, other = servers
    front = {
        "agent": "script",
        "network": {"allow": [other.address]},
        "secrets": {
            "GITHUB_TOKEN": {"env": "GH_TOKEN", "inject": "header", "hosts": [secret.address]},
            "PLAIN": {"env": "PLAIN_SECRET"},
        },
    }
    body = (PROBES.replace("@SECRET_HOST@", secret.address).replace("@OTHER_HOST@", other.address)
            .replace("HALF_A", HALVES[0]).replace("HALF_B", HALVES[1]))  # fmt: skip
    text = "---\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in front.items()) + "\n---\n# Inject\n" + body
    request = RunRequest(collection="inject", task_name="inject", task=task_from_runbook(parse(text)),
                         run_params={"snapshot": "", "image": base_image},
                         env={"GH_TOKEN": TOKEN, "PLAIN_SECRET": PLAIN})  # fmt: skip

    record = run(Services(get_settings()), request)

    assert record.status.value == "completed", record.error
    seen = {f.stem: f.read_text() for f in (run_folder(record) / "results").glob("*.txt")}
    # The secret's host got the real value, as a bearer token and inside Basic.
    assert seen["secret"].endswith("exit=0\n") and seen["basic"].endswith("exit=0\n"), seen
    assert [s["authorization"] for s in secret.seen] == [
        f"Bearer {TOKEN}",
        "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode(),
    ]
    # The sandbox holds a placeholder, and the echo came back with it, not the value.
    placeholder = next(
        line.split("=", 1)[1] for line in seen["env"].splitlines() if line.startswith("GH_TOKEN=")
    )
    assert placeholder.startswith("pier-secret-")
    assert f"x-echo-authorization: bearer {placeholder}" in seen["secret_headers"].lower()
    # Another allowed host saw only the placeholder.
    assert seen["other"].endswith("exit=0\n"), seen["other"]
    assert [s["authorization"] for s in other.seen] == [f"Bearer {placeholder}"]
    # Nowhere in the sandbox: environment, every process's environ, files.
    for name in ("env", "environ", "secret", "basic", "other", "secret_headers"):
        assert TOKEN not in seen[name], name
    assert f"GH_TOKEN={placeholder}" in seen["environ"]
    assert seen["files_value"] == ""
    assert "/app/results/env.txt" in seen["files_placeholder"].split()  # the same probe finds what is there
    # Without inject, a secret reaches the sandbox as before.
    assert seen["plain"].split()[0] == hashlib.sha256(PLAIN.encode()).hexdigest()
    log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    assert any(line.startswith("secret GITHUB_TOKEN: the sandbox holds a placeholder") for line in log)
    assert "egress put a secret in 2 request(s)" in log
    assert not any(TOKEN in line for line in log)
