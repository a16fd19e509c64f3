from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.sandbox.dockerfile import recipe_tag
from pier.sandbox.fake import FakeBackend, FakeEngine
from pier.sandbox.snapshots import (
    BUILTIN_SNAPSHOTS,
    SnapshotCatalog,
    image_mcp_servers,
    parse_facts,
    promise_shortfalls,
)


def test_builtins_exist_and_render_on_the_snapshot_base(make_settings):
    catalog = SnapshotCatalog(make_settings(snapshot_base_image="example/base:1"))
    assert set(BUILTIN_SNAPSHOTS) <= set(catalog.names())
    for name in BUILTIN_SNAPSHOTS:
        snapshot = catalog.get(name)
        assert snapshot is not None and snapshot.kind == "dockerfile"
        assert snapshot.dockerfile.startswith("#")
        assert "FROM example/base:1\n" in snapshot.dockerfile
        assert "{{" not in snapshot.dockerfile
        assert snapshot.dockerfile.rstrip().endswith("WORKDIR /app")


def test_python312_uv_has_compilers_browsers_node_and_uv(settings):
    text = SnapshotCatalog(settings).get("python312-uv").dockerfile
    for needle in (
        "build-essential",
        "gfortran",
        "git",
        "curl",
        "chromium",
        "uv-0.13.9-py3-none-manylinux",
        "playwright==",
        "@playwright/mcp@",
        "node-linux-$arch-$node_version.tgz",
        "node_version=22.",
        "sha512sum -c",
        "ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm",
    ):
        assert needle in text, needle
    assert "pier-ca.crt" not in text


def test_ca_bundle_setting_adds_the_ca_setup(make_settings, tmp_path):
    bundle = tmp_path / "ca.crt"
    bundle.write_text("pem")
    text = SnapshotCatalog(make_settings(ca_bundle=bundle)).get("prism-playwright").dockerfile
    assert "COPY pier-ca.crt /etc/pier/ca-bundle.crt" in text
    assert text.index("COPY pier-ca.crt") < text.index("apt-get")


def test_snapshot_source_says_where_the_sandbox_comes_from(settings):
    source = SnapshotCatalog(settings).get("python312-uv").source()
    assert source.kind == "snapshot" and source.name == "python312-uv"
    assert source.dockerfile and source.image is None
    assert source.log_line == "Creating sandbox from snapshot: python312-uv"


def test_user_snapshots_add_and_override_builtins(settings, write_snapshots, tmp_path):
    (settings.snapshots_file.parent / "envs").mkdir(parents=True)
    (settings.snapshots_file.parent / "envs" / "big.Dockerfile").write_text("FROM {{base_image}}\n")
    write_snapshots(
        """
snapshots:
  report-env: {image: ghcr.io/acme/report-env:1.4.2, description: reports}
  python312-uv: {dockerfile: "FROM mine\\n", description: my default}
  big-env: {dockerfile_path: envs/big.Dockerfile}
"""
    )
    catalog = SnapshotCatalog(settings)
    report = catalog.get("report-env")
    assert report.kind == "image" and report.image == "ghcr.io/acme/report-env:1.4.2"
    assert report.description == "reports" and report.origin == str(settings.snapshots_file)
    assert report.source().image == "ghcr.io/acme/report-env:1.4.2"
    assert catalog.get("python312-uv").dockerfile == "FROM mine\n"
    assert catalog.get("big-env").dockerfile == f"FROM {settings.snapshot_base_image}\n"
    assert "prism-playwright" in catalog


def test_an_empty_or_missing_file_adds_nothing(settings, write_snapshots):
    assert SnapshotCatalog(settings).names() == sorted(BUILTIN_SNAPSHOTS)
    write_snapshots("")
    assert SnapshotCatalog(settings).names() == sorted(BUILTIN_SNAPSHOTS)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("snapshots: [\n", "not valid YAML"),
        ("snapshots:\n  two: {image: a, dockerfile: b}\n", "snapshot 'two'"),
        ("snapshots:\n  none: {description: x}\n", "snapshot 'none'"),
        ("snapshots:\n  typo: {imgae: a}\n", "snapshot 'typo': imgae"),
        ("snapshots:\n  empty: {image: ''}\n", "snapshot 'empty'"),
        ("snapshots:\n  Bad_Name: {image: a}\n", "snapshot 'Bad_Name'"),
        ("snapshots:\n  gone: {dockerfile_path: nowhere.Dockerfile}\n", "snapshot 'gone'"),
        ("- just\n- a list\n", "top level"),
        ("snapshot: {}\n", "top level"),
    ],
)
def test_a_malformed_file_names_the_file_and_the_entry(settings, write_snapshots, text, needle):
    path = write_snapshots(text)
    with pytest.raises(InputError) as err:
        SnapshotCatalog(settings)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_list_reports_kind_description_and_whether_built(settings, write_snapshots):
    write_snapshots("snapshots:\n  report-env: {image: acme/report:1, description: reports}\n")
    catalog = SnapshotCatalog(settings)
    built_tag = recipe_tag("python312-uv", catalog.get("python312-uv").dockerfile, None)
    statuses = {s.name: s for s in catalog.list(FakeBackend(engine=FakeEngine(images=[built_tag])))}
    assert set(statuses) == {"prism-playwright", "python312-uv", "report-env"}
    assert statuses["python312-uv"].built and statuses["python312-uv"].image == built_tag
    assert statuses["python312-uv"].origin == "built-in"
    assert not statuses["prism-playwright"].built
    report = statuses["report-env"]
    assert (report.kind, report.image, report.built, report.description) == (
        "image",
        "acme/report:1",
        False,
        "reports",
    )


def test_each_builtin_carries_the_four_agent_clis_at_their_pins_and_says_so_in_a_label(settings):
    """A run on a built snapshot installs nothing: the CLIs are in it, installed by
    pier's own installer script (so pins and method agree with a run-time install)."""
    from pier.agents.pins import PINS

    for name in BUILTIN_SNAPSHOTS:
        text = SnapshotCatalog(settings).get(name).dockerfile
        for agent in ("claude-code", "codex", "opencode", "hermes"):
            pin = PINS[agent]
            assert f"# pier-step: {agent} {pin.version} ({pin.spec} from {pin.registry})" in text
        label = ",".join(f"{a}={PINS[a].version}" for a in ("claude-code", "codex", "opencode", "hermes"))
        assert f'LABEL pier.agents="{label}"' in text
        assert "LABEL pier.mcp_servers=" in text and "PLAYWRIGHT_BROWSERS_PATH=/ms-playwright" in text


def test_the_python_mirror_reaches_the_recipe_and_a_mirror_that_is_no_plain_url_is_refused(make_settings):
    text = (
        SnapshotCatalog(make_settings(python_install_mirror="https://mirror.example/pbs"))
        .get("python312-uv")
        .dockerfile
    )
    assert "mirror='https://mirror.example/pbs'" in text
    with pytest.raises(InputError, match=r"PIER_PYTHON_INSTALL_MIRROR.*plain"):
        SnapshotCatalog(make_settings(python_install_mirror="https://x/'; rm -rf / #"))


def test_a_snapshot_short_of_its_promise_says_what_and_how_to_get_it():
    facts = parse_facts(
        b'{"python3": "3.11.2", "node": "22.23.5", "uv": "0.13.9", "git": "2.39.5", "curl": "7.88.1",'
        b' "chromium": "150.0", "playwright": "1.65.2", "playwright-mcp": "0.0.83", "gcc": "12.2.0",'
        b' "gfortran": "12.2.0", "claude-code": "2.1.332 (Claude Code)", "codex": "codex-cli 0.171.0",'
        b' "opencode": "1.18.33", "hermes": "Hermes Agent v0.19.0", "built": "x"}'
    )
    (note,) = promise_shortfalls("python312-uv", facts)
    assert note.startswith("python312-uv promises python3 3.12; the image has 3.11.2")
    assert "PIER_PYTHON_INSTALL_MIRROR" in note
    assert promise_shortfalls("python312-uv", {**facts, "python3": "3.12.7"}) == []
    assert promise_shortfalls("python312-uv", {**facts, "python3": "3.120.1"})  # a prefix is a whole part
    assert promise_shortfalls("python312-uv", {**facts, "python3": "3.12.7", "hermes": ""}) == [
        "python312-uv promises hermes but the image has none"
    ]
    assert promise_shortfalls("my-env", facts) == []  # a user's snapshot promises nothing
    assert parse_facts(b"not json") == {} and parse_facts(None) == {}


def test_the_mcp_servers_an_image_offers_are_read_from_its_label():
    label = '{"playwright": {"command": "playwright-mcp", "args": ["--headless"]}, "bad": {"args": []}}'
    assert image_mcp_servers({"pier.mcp_servers": label}) == {
        "playwright": {"command": "playwright-mcp", "args": ["--headless"]}
    }
    assert image_mcp_servers({}) == {} and image_mcp_servers({"pier.mcp_servers": "[1]"}) == {}
