"""A collection's named volumes: list and remove (docs/sessions.md#volumes)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from pier.api.auth import CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.lifecycle.volumes import Volume
from pier.server.services import volumes as service

router = APIRouter(prefix="/api/v1", tags=["volumes"], responses=ERROR_RESPONSES)


class VolumeOut(BaseModel):
    name: str
    engine_name: str
    created: str | None = None
    in_use: int | None = None
    paths: list[str] = []  # where the sandboxes that mount it now see it


class VolumeList(BaseModel):
    collection: str
    volumes: list[VolumeOut]


def _out(volume: Volume) -> VolumeOut:
    return VolumeOut(
        name=volume.name,
        engine_name=volume.engine_name,
        created=volume.created,
        in_use=volume.in_use,
        paths=list(volume.paths),
    )


@router.get("/volume/{collection}", summary="List a collection's volumes")
def list_volumes(collection: CollectionDep, state: StateDep) -> VolumeList:
    """The named volumes the collection's runbooks declared (`volumes:`) and
    its runs made, with the sandboxes that mount each now."""
    return VolumeList(collection=collection, volumes=[_out(v) for v in service.volumes(state, collection)])


@router.delete("/volume/{collection}/{name}", summary="Remove a collection's volume and its data")
def remove_volume(collection: CollectionDep, name: str, state: StateDep) -> VolumeOut:
    """404 when the collection has no volume of that name (another
    collection's is none of its), 409 while a sandbox mounts it."""
    return _out(service.remove(state, collection, name))
