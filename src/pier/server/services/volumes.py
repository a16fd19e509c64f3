"""A collection's named volumes (docs/sessions.md#volumes): listed and removed
by the collection's token (or the admin's), never another collection's."""

from __future__ import annotations

from pier.errors import VolumeInUse
from pier.lifecycle.volumes import Volume, list_volumes, remove_volume
from pier.server.errors import ServiceError
from pier.server.state import ApiState


def volumes(state: ApiState, collection: str) -> list[Volume]:
    return list_volumes(state.services.backend, collection)


def remove(state: ApiState, collection: str, name: str) -> Volume:
    """Remove the collection's volume `name`: 404 when it has none of that
    name, 409 while a sandbox mounts it, 422 for a bad name."""
    try:
        return remove_volume(state.services.backend, collection, name)
    except VolumeInUse as exc:
        raise ServiceError(409, str(exc)) from None
