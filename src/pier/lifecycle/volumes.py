"""A collection's named volumes (docs/sessions.md#volumes): what a runbook's
`volumes:` mounts, the engine's name of each, and `pier volume list|rm`.

A volume belongs to one collection. Its engine name is derived from a digest
of the collection and its name (`pier-vol-<digest>-<name>`), and it carries
the collection and the name as labels; a run mounts only its collection's
(a volume of that engine name with other labels is refused, never mounted),
and lists and removals are scoped by the collection's label. It is made on a
run's first use, outlives every sandbox, and is removed only by `pier volume
rm` (or the API's DELETE). What it holds counts toward no limit of pier's:
not the sandbox's disk limit (PIER_DISK_LIMIT, the sandbox's own files), not
the collection's stored outputs; PIER_VOLUMES_PER_COLLECTION bounds how many
a collection has.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pier.errors import InputError, NotFoundError
from pier.runbook.volumes import name_problem
from pier.sandbox.base import LABEL_VOLUME, LABEL_VOLUME_COLLECTION, SandboxBackend, VolumeInfo, VolumeMount

VOLUME_PREFIX = "pier-vol-"


def engine_name(collection: str, name: str) -> str:
    """The engine's volume for the collection's volume `name`: no two
    collections' are one (a digest of the collection, then the name)."""
    digest = hashlib.sha256(collection.encode()).hexdigest()[:24]
    return f"{VOLUME_PREFIX}{digest}-{name}"


def labels_of(collection: str, name: str | None = None) -> dict[str, str]:
    labels = {LABEL_VOLUME_COLLECTION: collection}
    if name is not None:
        labels[LABEL_VOLUME] = name
    return labels


@dataclass(frozen=True)
class Volume:
    collection: str
    name: str  # in the collection
    engine_name: str
    created: str | None
    in_use: int | None  # sandboxes that mount it now
    paths: tuple[str, ...] = ()  # where they see it, when the backend tells


def run_mounts(
    backend: SandboxBackend, collection: str, volumes: tuple[tuple[str, str, bool], ...], limit: int
) -> tuple[VolumeMount, ...]:
    """The mounts of a run's `volumes:`; InputError when they would make the
    collection hold more than `limit` volumes (PIER_VOLUMES_PER_COLLECTION)."""
    if not volumes:
        return ()
    mounts = tuple(
        VolumeMount(engine_name(collection, name), path, read_only, labels_of(collection, name))
        for name, path, read_only in volumes
    )
    have = {v.name for v in backend.list_volumes(labels_of(collection))}
    new = [m for m in mounts if m.name not in have]
    if new and len(have) + len(new) > limit:
        raise InputError(
            f"collection {collection!r} has {len(have)} volume(s) and this run would make {len(new)} more, "
            f"past PIER_VOLUMES_PER_COLLECTION ({limit}): remove one with `pier volume rm NAME`"
        )
    return mounts


def list_volumes(backend: SandboxBackend, collection: str) -> list[Volume]:
    found = backend.list_volumes(labels_of(collection))
    return sorted(
        (
            _volume(collection, info)
            for info in found
            if info.labels.get(LABEL_VOLUME_COLLECTION) == collection
        ),
        key=lambda v: v.name,
    )


def _volume(collection: str, info: VolumeInfo) -> Volume:
    return Volume(
        collection, info.labels.get(LABEL_VOLUME, ""), info.name, info.created, info.in_use, tuple(info.paths)
    )


def remove_volume(backend: SandboxBackend, collection: str, name: str) -> Volume:
    """Remove the collection's volume `name` and its data. NotFoundError when
    the collection has none of that name (another collection's is none of
    its); SandboxError when a sandbox mounts it."""
    problem = name_problem(name)
    if problem:
        raise InputError(problem)
    mine = [v for v in list_volumes(backend, collection) if v.name == name]
    if not mine:
        raise NotFoundError(
            f"no volume {name!r} in collection {collection!r}: `pier volume list` shows its volumes"
        )
    if not backend.remove_volume(mine[0].engine_name):
        raise NotFoundError(f"no volume {name!r} in collection {collection!r}")
    return mine[0]
