"""`pier storage migrate`: the test's own local store copied to a fresh prefix
of the test S3 bucket, by the one command the README documents."""

from __future__ import annotations

from typer.testing import CliRunner

from pier.cli import app
from pier.settings import get_settings
from pier.storage import LocalStorage, open_storage
from tests.support.s3 import s3_scratch_url

runner = CliRunner()


def test_migrate_copies_the_local_store_to_s3_and_says_what_to_set() -> None:
    url = s3_scratch_url()
    local = LocalStorage(get_settings().storage_root)
    local.put_bytes("team-a/report/r1/results/report.md", b"# report\n")
    local.put_bytes("team-a/.uploads/" + "b" * 32 + "/in.csv", b"a,b\n")
    done = runner.invoke(app, ["storage", "migrate", "--to", url])
    assert done.exit_code == 0, done.output
    assert "copied 2 file(s)" in done.output and f"PIER_STORAGE_URL={url}" in done.output
    target = open_storage(url)
    assert [f.key for f in target.files("")] == [f.key for f in local.files("")]
    with target.open("team-a/report/r1/results/report.md") as stream:
        assert stream.read() == b"# report\n"
    again = runner.invoke(app, ["storage", "migrate", "--to", url])
    assert "copied 0 file(s)" in again.output and "2 already there" in again.output
    target.delete("team-a")


def test_migrate_refuses_an_unusable_url_naming_the_form() -> None:
    done = runner.invoke(app, ["storage", "migrate", "--to", "ftp://host/x"])
    assert done.exit_code == 2 and "s3://BUCKET" in done.output


def test_where_names_the_storage_and_refuses_a_bucket_that_is_not_there(monkeypatch) -> None:
    url = s3_scratch_url()
    monkeypatch.setenv("PIER_STORAGE_URL", url)
    get_settings.cache_clear()
    shown = runner.invoke(app, ["storage", "where"])
    assert shown.exit_code == 0 and shown.output.strip() == url
    monkeypatch.setenv("PIER_STORAGE_URL", "s3://no-such-bucket-here/x")
    get_settings.cache_clear()
    missing = runner.invoke(app, ["storage", "where"])
    assert (
        missing.exit_code == 1
        and "no-such-bucket-here" in missing.output
        and "AWS_ENDPOINT_URL" in missing.output
    )
