from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.sandbox.snapshots import SnapshotCatalog
from pier.sandbox.source import resolve_source


@pytest.fixture
def resolve(settings):
    catalog = SnapshotCatalog(settings)

    def call(**given):
        args = {
            "snapshot": None,
            "image": None,
            "base_image": None,
            "apt_packages": [],
            "pip_packages": [],
            "catalog": catalog,
            "settings": settings,
        }
        args.update(given)
        return resolve_source(**args)

    return call


def test_an_existing_snapshot_wins_over_image_and_dockerfile(resolve):
    source = resolve(snapshot="python312-uv", image="acme/env:1", base_image="debian:bookworm")
    assert source.kind == "snapshot" and source.name == "python312-uv"
    assert source.log_line == "Creating sandbox from snapshot: python312-uv"
    assert source.dockerfile and source.image is None


def test_packages_with_a_snapshot_are_reported_as_having_no_effect(resolve):
    source = resolve(snapshot="python312-uv", apt_packages=["jq"], pip_packages=["six"])
    (note,) = source.notes
    assert "apt_packages and pip_packages had no effect" in note
    assert "snapshot 'python312-uv'" in note and "generated Dockerfile" in note


def test_a_snapshot_without_packages_has_no_notes(resolve):
    assert resolve(snapshot="python312-uv").notes == ()


def test_image_when_no_snapshot(resolve):
    source = resolve(image="ghcr.io/acme/report-env:1.4.2")
    assert source.kind == "image" and source.image == "ghcr.io/acme/report-env:1.4.2"
    assert source.log_line == "Creating sandbox from registry image: ghcr.io/acme/report-env:1.4.2"
    assert source.dockerfile is None and source.notes == ()


def test_an_empty_snapshot_means_unset(resolve):
    assert resolve(snapshot="", image="acme/env:1").kind == "image"
    assert resolve(snapshot="  ", image="acme/env:1").notes == ()


def test_packages_with_an_image_are_reported_as_having_no_effect(resolve):
    source = resolve(image="acme/env:1", pip_packages=["six"], base_image="debian:bookworm")
    (note,) = source.notes
    assert "base_image and pip_packages had no effect" in note and "image acme/env:1" in note


def test_an_unknown_snapshot_falls_through_to_the_image(resolve):
    source = resolve(snapshot="nope", image="acme/env:1")
    assert source.kind == "image" and source.image == "acme/env:1"
    (note,) = source.notes
    assert note.startswith("snapshot 'nope' not found, falling through to image acme/env:1 ")
    assert "prism-playwright, python312-uv" in note  # the names it could have meant


def test_an_unknown_snapshot_falls_through_to_the_dockerfile(resolve, settings):
    source = resolve(snapshot="nope", apt_packages=["jq"])
    assert source.kind == "dockerfile"
    (note,) = source.notes
    assert note.startswith("snapshot 'nope' not found, falling through to a generated Dockerfile ")
    assert dict(source.files)["pier-apt.txt"] == b"jq\n"


def test_dockerfile_on_the_given_base_with_packages(resolve):
    source = resolve(snapshot="", image="", base_image="python:3.12-slim-bookworm",
                     apt_packages=["ffmpeg"], pip_packages=["pandas"])  # fmt: skip
    assert source.kind == "dockerfile" and source.name == "generated" and source.image is None
    assert source.log_line == "Creating sandbox from generated Dockerfile (base: python:3.12-slim-bookworm)"
    assert "FROM python:3.12-slim-bookworm\n" in source.dockerfile
    assert dict(source.files) == {"pier-apt.txt": b"ffmpeg\n", "pier-requirements.txt": b"pandas\n"}
    assert source.notes == ()


def test_dockerfile_base_defaults_to_the_setting(make_settings):
    settings = make_settings(base_image="pier-base:bookworm")
    source = resolve_source(
        snapshot=None, image=None, base_image="", apt_packages=[], pip_packages=[],
        catalog=SnapshotCatalog(settings), settings=settings,
    )  # fmt: skip
    assert source.log_line == "Creating sandbox from generated Dockerfile (base: pier-base:bookworm)"
    assert "FROM pier-base:bookworm\n" in source.dockerfile


def test_dockerfile_installs_the_ca_bundle_when_one_is_configured(make_settings, tmp_path):
    bundle = tmp_path / "ca.crt"
    bundle.write_text("pem")
    settings = make_settings(ca_bundle=bundle)
    source = resolve_source(
        snapshot=None, image=None, base_image=None, apt_packages=[], pip_packages=[],
        catalog=SnapshotCatalog(settings), settings=settings,
    )  # fmt: skip
    assert "COPY pier-ca.crt" in source.dockerfile


def test_user_snapshot_of_an_image(settings, write_snapshots, resolve):
    write_snapshots("snapshots:\n  report-env: {image: acme/report:1}\n")
    source = resolve(snapshot="report-env", catalog=SnapshotCatalog(settings))
    assert source.kind == "snapshot" and source.image == "acme/report:1"
    assert source.log_line == "Creating sandbox from snapshot: report-env"


def test_bad_packages_on_the_dockerfile_path_are_an_input_error(resolve):
    with pytest.raises(InputError, match="'jq; reboot'"):
        resolve(apt_packages=["jq; reboot"])


def test_bad_packages_are_not_checked_where_they_have_no_effect(resolve):
    assert resolve(image="acme/env:1", apt_packages=["jq; reboot"]).kind == "image"
