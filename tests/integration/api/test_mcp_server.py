"""The platform's own MCP server (jetty-mcp-server, pinned in tests/sdk)
against a real `pier serve` on SQLite and on PostgreSQL: the Node script
(tests/sdk/mcp_suite.mjs) starts it over stdio as an agent's MCP client would,
lists its tools and calls every one through an MCP client; this test starts the
server, hands it a collection and reports each tool's result."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from tests.support.api_server import ADMIN_TOKEN, Server, make_collection
from tests.support.sdk import MCP_SUITE, node

pytestmark = pytest.mark.integration

# The tools jetty-mcp-server 1.1.0 lists: the suite must call every one.
TOOLS = 27
SUITE_TIMEOUT_SEC = 900


@pytest.fixture(scope="module")
def mcp_server(new_db, tmp_path_factory, docker_backend, base_image) -> Iterator[Server]:
    srv = Server(
        home=tmp_path_factory.mktemp("pier-mcp"),
        db_url=new_db(),
        settings={"PIER_MAX_CONCURRENT_RUNS": "2", "PIER_TRIAL_KEYS": json.dumps({"PIER_TRIAL_PROBE": "t"})},
    ).start()
    yield srv
    srv.stop()


def test_every_tool_of_the_platforms_mcp_server_works_against_pier(mcp_server: Server, base_image: str):
    binary = node()
    collection = make_collection(mcp_server, base_image, prefix="mcp")
    config = {"url": mcp_server.url, "admin_token": ADMIN_TOKEN, "collection": collection.name,
              "token": collection.token, "image": base_image}  # fmt: skip
    done = subprocess.run(
        [binary, str(MCP_SUITE)],
        env={"PATH": "/usr/bin:/bin", "PIER_SDK_CONFIG": json.dumps(config), "HOME": str(mcp_server.home)},
        capture_output=True, text=True, timeout=SUITE_TIMEOUT_SEC, cwd=MCP_SUITE.parent,
    )  # fmt: skip
    assert done.stdout.strip(), f"the suite printed nothing:\n{done.stderr[-3000:]}\n{mcp_server.log_tail()}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n".join(f"{r['tool']}: {'ok' if r['ok'] else 'FAILED'}" for r in report["results"]))
    failed = [f"{r['tool']}: {r['detail']}" for r in report["results"] if not r["ok"]]
    assert not failed, "\n".join(failed) + f"\n--- server log ---\n{mcp_server.log_tail()}"
    assert report["missing"] == [], f"tools no block calls: {report['missing']}"
    assert len(report["listed"]) == TOOLS, f"the pinned server's tools changed: {report['listed']}"
    assert done.returncode == 0, done.stderr[-3000:]
