"""PIER_SANDBOX_BACKEND chooses the backend: built-in names, registered names,
module:factory, and an error that lists the choices."""

from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.sandbox import backend_names, get_backend, register_backend
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.fake import FakeBackend


def test_docker_is_the_default(settings):
    assert settings.sandbox_backend == "docker"
    assert isinstance(get_backend(settings), DockerBackend)


def test_the_fake_is_chosen_by_name_and_scripted(make_settings):
    backend = get_backend(make_settings(sandbox_backend="fake"))
    assert isinstance(backend, FakeBackend) and not backend.processes


def test_a_registered_backend_is_chosen_by_its_name(make_settings, monkeypatch):
    monkeypatch.setattr("pier.sandbox._registered", {})
    made = []

    def factory(settings):
        made.append(settings)
        return FakeBackend(settings, processes=True)

    register_backend("test-registered", factory)
    settings = make_settings(sandbox_backend="test-registered")
    assert get_backend(settings).processes and made == [settings]
    assert "test-registered" in backend_names()


def test_module_colon_factory_loads_a_backend_by_path(make_settings):
    backend = get_backend(make_settings(sandbox_backend="pier.sandbox.fake:FakeBackend"))
    assert isinstance(backend, FakeBackend)


def test_an_unknown_name_lists_the_choices(make_settings):
    with pytest.raises(InputError, match=r"PIER_SANDBOX_BACKEND='kubernetes'.*docker, fake"):
        get_backend(make_settings(sandbox_backend="kubernetes"))


def test_a_factory_that_cannot_load_says_which(make_settings):
    with pytest.raises(InputError, match=r"cannot load pier.sandbox.fake:Nope"):
        get_backend(make_settings(sandbox_backend="pier.sandbox.fake:Nope"))
