"""Moving a store to another storage (a local folder to S3): every file copied
under the same key, streamed, skipping what is already there at the same size,
so an interrupted migration is finished by running it again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from pier.errors import NotFoundError
from pier.storage.base import RunStorage, StoredFile
from pier.storage.files import content_type


@dataclass
class Migrated:
    copied: int = 0
    skipped: int = 0
    bytes: int = 0


def migrate(
    source: RunStorage, dest: RunStorage, on_file: Callable[[StoredFile], None] | None = None
) -> Migrated:
    """Copy every file of `source` to `dest` under its key; the source is left as it is."""
    done = Migrated()
    for item in source.files(""):
        try:
            if dest.stat(item.key).size == item.size:
                done.skipped += 1
                continue
        except NotFoundError:
            pass
        with source.open(item.key) as stream:
            dest.put_stream(item.key, stream, content_type(PurePosixPath(item.key)))
        done.copied += 1
        done.bytes += item.size
        if on_file is not None:
            on_file(item)
    return done
