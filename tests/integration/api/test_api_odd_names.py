"""Names are data: a run's result files named with any bytes a sandbox can
make (invalid UTF-8, newlines, control characters, `..`-looking names, 255
bytes) are collected, stored, listed and served under one rule (docs/storage.md,
"Names of files a run made"): a name that is not printable UTF-8 is shown
percent-encoded, and served under that spelling. Never a 500."""

from __future__ import annotations

import html
import json
import re
import urllib.parse

import httpx
import pytest
from tests.support.api_server import ADMIN_TOKEN, Collection

pytestmark = pytest.mark.integration

# The raw names, as bytes; the script makes them with printf's octal escapes.
NAMES = [
    b"\xff\xfe",
    b"two\nlines",
    b"bell\x07tab\t",
    b"...",
    b"..x",
    b"\xe2\x80\xae",
    b"\xff" * 200,
    b"a" * 255,
    b"ok.txt",
    b"100%.txt",
]


def _script() -> str:
    made = []
    for raw in NAMES:
        octal = "".join(f"\\{b:03o}" for b in raw)
        made.append(
            f'name="$(printf "{octal}_")"; printf "%s" "{raw.hex()}" > "{{{{results_dir}}}}/${{name%_}}"'
        )
    return "\n".join(made)


def test_odd_result_names_survive_and_every_view_answers(collection: Collection):
    """Before: the admin's GET /api/v1/runs, /db/trajectories/<c>/<t> and
    run-sync answered 500 on a run whose result file was named b'\\xff\\xfe'."""
    collection.put_task("odd", _script())
    tid = collection.run("odd")
    record = collection.wait("odd", tid)
    assert record["status"] == "completed", record["error"]

    with collection.server.client(ADMIN_TOKEN) as admin:
        runs = admin.get("/api/v1/runs", params={"limit": 100})
        assert runs.status_code == 200, runs.text[:300]
    with collection.client() as c:
        listed = c.get(f"/api/v1/db/trajectories/{collection.name}/odd")
        assert listed.status_code == 200, listed.text[:300]
        synced = c.post(f"/api/v1/run-sync/{collection.name}/odd", json={})
        assert synced.status_code == 200, synced.text[:300]
        zipped = c.get(f"/api/v1/trajectory/{collection.name}/odd/{tid}/download")
        assert zipped.status_code == 200

        from pier.names import file_name as shown_name

        files = record["steps"]["run"]["outputs"]["files"]
        json.dumps(files, ensure_ascii=True)  # plain strings all
        shown = {shown_name(raw) for raw in NAMES}
        names = {f.rsplit("/", 1)[-1] for f in files}
        assert shown <= names, (shown - names, names)
        for raw in NAMES:
            path = next(f for f in files if f.endswith("/" + shown_name(raw)))
            assert all(ch.isprintable() for ch in path) and "\n" not in path
            got = c.get("/api/v1/file/" + urllib.parse.quote(path, safe="/"))
            assert got.status_code == 200, (raw, got.status_code, got.text[:200])
            assert got.content.decode() == raw.hex(), raw

    # The web UI: the run's page lists them, and serves each.
    jar = {"pier_session": collection.token}
    with httpx.Client(base_url=collection.server.url, cookies=jar, timeout=60) as web:
        page = web.get(f"/runs/{tid}")
        assert page.status_code == 200, page.text[:300]
        for raw in NAMES:
            assert html.escape(shown_name(raw), quote=False) in page.text, raw
            quoted = urllib.parse.quote(shown_name(raw))
            assert f'href="/runs/{tid}/files/{quoted}"' in page.text, raw  # links percent-encode the name
            shown = web.get(f"/runs/{tid}/files/{quoted}")
            assert shown.status_code == 200, (raw, shown.status_code)
            link = re.search(r'href="(/api/v1/file/[^"]+)" download', shown.text)
            assert link, shown.text[-500:]
            served = web.get(html.unescape(link.group(1)))
            assert served.status_code == 200 and served.content.decode() == raw.hex(), raw
