"""What the web UI's pages derive from a run: rendered Markdown (never raw
HTML), previews, the agent transcript via the CLI adapters' readable(), charts."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pier.record import ResultFile, RunStatus, Trajectory
from pier.storage.local import LocalStorage
from pier.web import charts, views
from pier.web.pages import _safe_next
from pier.web.session import csrf_token

STREAMS = Path(__file__).parents[1] / "agents" / "streams"
T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)


def test_markdown_escapes_html_and_drops_script_links():
    html = views.markdown("# Hi\n\n<script>alert(1)</script> <b>x</b> [link](javascript:alert(1))")
    assert "<h1>Hi</h1>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>" not in html
    assert 'href="javascript' not in html


def _run_with_files(storage: LocalStorage, files: dict[str, bytes], primary: list[str]) -> Trajectory:
    record = Trajectory.new("r1", "c", "t", init_params={"agent": "claude-code"})
    folder = storage.run_dir("c", "t", "r1") / "results"
    folder.mkdir(parents=True)
    results = []
    for name, data in files.items():
        (folder / name).write_bytes(data)
        ext = name.rsplit(".", 1)[-1]
        kind = {"md": "text/markdown", "json": "application/json", "csv": "text/csv", "png": "image/png",
                "bin": "application/octet-stream"}[ext]  # fmt: skip
        results.append(ResultFile(path=name, content_type=kind, extension=ext, size=len(data)))
    record.set_results(results, primary)
    return record


def test_files_primary_first_and_previews_by_kind(tmp_path: Path):
    storage = LocalStorage(tmp_path)
    record = _run_with_files(
        storage,
        {"a.json": b'{"b":1}', "b.csv": b"x,y\n1,2\n", "c.png": b"\x89PNG", "d.bin": b"\0", "z.md": b"# Z"},
        primary=["z.md", "b.csv"],
    )
    assert [f.path for f in views.ordered_files(record)] == ["z.md", "b.csv", "a.json", "c.png", "d.bin"]
    shown = {f.path: views.preview(storage, "c", f) for f in record.outputs.results_files}
    assert shown["z.md"].kind == "markdown" and "<h1>Z</h1>" in shown["z.md"].html
    assert shown["a.json"].kind == "json" and shown["a.json"].text == '{\n  "b": 1\n}'
    assert shown["b.csv"].rows == [["x", "y"], ["1", "2"]]
    assert shown["c.png"].kind == "image"
    assert shown["d.bin"].kind == "none"


def test_a_long_file_is_previewed_in_part(tmp_path: Path):
    storage = LocalStorage(tmp_path)
    record = _run_with_files(storage, {"big.md": b"x" * (views.PREVIEW_BYTES + 10)}, [])
    shown = views.preview(storage, "c", record.outputs.results_files[0])
    assert shown.truncated and len(shown.html) < views.PREVIEW_BYTES + 100


def test_transcript_uses_the_agent_adapters_readable_lines(tmp_path: Path):
    storage = LocalStorage(tmp_path)
    record = Trajectory.new("r1", "c", "t", init_params={"agent": "claude-code"})
    logs = storage.run_dir("c", "t", "r1") / "logs"
    logs.mkdir()
    shutil.copy(STREAMS / "claude-code.jsonl", logs / "claude-code.jsonl")
    entries = views.transcript(storage, record)
    kinds = [e.kind for e in entries]
    assert "call" in kinds and "result" in kinds and "message" in kinds
    call = next(e for e in entries if e.kind == "call")
    assert call.text.startswith("tool Write(") and "file_path=" in call.text
    assert not any(e.text.lstrip().startswith("{") for e in entries)  # no raw JSON


def test_transcript_of_an_unknown_agent_shows_lines_as_they_are(tmp_path: Path):
    storage = LocalStorage(tmp_path)
    record = Trajectory.new("r1", "c", "t", init_params={"agent": "no-such-agent"})
    logs = storage.run_dir("c", "t", "r1") / "logs"
    logs.mkdir()
    (logs / "agent.log").write_text("hello\nerror: bad\n")
    assert [(e.kind, e.text) for e in views.transcript(storage, record)] == [
        ("message", "hello"),
        ("error", "error: bad"),
    ]


def test_csrf_token_is_per_session_and_next_stays_on_site():
    assert csrf_token("a") == csrf_token("a") != csrf_token("b")
    assert "pier_secret" not in csrf_token("pier_secret") and len(csrf_token("x")) == 64
    assert _safe_next("/runs/x?y=1") == "/runs/x?y=1"
    for bad in ("https://evil.example", "//evil.example", "/\\evil", "", None):
        assert _safe_next(bad) == "/runs"


def test_charts_count_days_success_and_durations():
    records = []
    for day, status, success, seconds in ((0, RunStatus.completed, True, 10.0), (0, RunStatus.failed, False, 30.0),
                                          (2, RunStatus.completed, True, 5.0)):  # fmt: skip
        record = Trajectory.new(f"r{len(records)}", "c", "t", created=T0 + timedelta(days=day))
        record.status, record.outputs.success, record.duration_seconds = status, success, seconds
        records.append(record)
    days = charts.by_day(records)
    assert [(d.day.day, d.runs, d.success_rate, d.median_duration) for d in days] == [
        (5, 2, 0.5, 20.0),
        (7, 1, 1.0, 5.0),
    ]
    runs, success, durations = charts.task_charts(days)
    assert runs.count("<rect") == 2 and "Runs per day" in runs
    assert "2026-01-05: 50%" in success and "2026-01-07: 5 s" in durations
    svg = charts.bars("<x>", ["<a>"], [1.0], 1.0, "")
    assert "<x>" not in svg and "&lt;x&gt;" in svg


def test_a_runbook_shows_its_frontmatter_as_text_and_its_body_rendered():
    shown = views.runbook_view("---\nagent: script\n---\n# Do it\n\n```bash\necho <hi>\n```\n")
    assert shown.frontmatter == "agent: script\n"
    assert "<h1>Do it</h1>" in shown.body and "echo &lt;hi&gt;" in shown.body
    unclosed = views.runbook_view("---\nagent: x\n# never closed")
    assert unclosed.frontmatter is None and "never closed" in unclosed.body


def test_every_template_compiles_and_autoescapes():
    from pier.web.render import templates

    names = templates.env.list_templates()
    assert {"base.html", "runs.html", "run.html", "task.html", "settings.html", "overview.html"} <= set(names)
    for name in names:
        templates.env.get_template(name)
    rendered = templates.env.get_template("error.html").render(
        status=404, detail="<script>x</script>", errors=[]
    )
    assert "<script>x" not in rendered and "&lt;script&gt;x" in rendered


def test_a_reports_relative_images_come_from_its_own_folder(tmp_path: Path):
    storage = LocalStorage(tmp_path)
    text = b"![chart](chart.png) ![far](https://example.com/x.png) ![abs](/x.png)"
    record = _run_with_files(storage, {"report.md": text}, ["report.md"])
    shown = views.preview(storage, "c", record.outputs.results_files[0])
    assert 'src="/api/v1/file/c/t/r1/results/chart.png"' in shown.html
    assert 'src="https://example.com/x.png"' in shown.html and 'src="/x.png"' in shown.html
