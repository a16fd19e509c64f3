"""`pier snapshot layers` and `pier sweep --images`: the agent layers on the engine
(an image plus a pinned agent CLI, built once and reused by every run of that
agent on that image), and removing the ones no run used for a while."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from pier.cli.console import out
from pier.errors import InputError
from pier.sandbox.base import LayerInfo, SandboxBackend

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> float:
    """Seconds in `30m`, `12h`, `7d`, `2w` (or a sum: `1d12h`). Raises InputError."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not parts or _DURATION.sub("", cleaned).strip():
        raise InputError(f"--older-than {text!r}: give a duration such as 30m, 12h, 7d or 2w")
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def last_use(layer: LayerInfo) -> float:
    """When a run last used it on this machine, else when it was built."""
    return max(layer.created, layer.last_used or 0.0)


def show_layers(backend: SandboxBackend) -> None:
    layers = backend.list_layers()
    if not out.is_terminal:  # piped: a header, then tab-separated rows
        print("\t".join(("image", "agent", "version", "base", "size", "created", "last used")))
        for layer in layers:
            print("\t".join((layer.image, layer.name, layer.version, layer.base, str(layer.size),
                             _when(layer.created), _when(layer.last_used))))  # fmt: skip
        return
    from rich import filesize
    from rich.table import Table

    table = Table("image", "agent", "version", "base", "size", "created", "last used")
    for layer in layers:
        table.add_row(layer.image, layer.name, layer.version, layer.base, filesize.decimal(layer.size),
                      _when(layer.created), _when(layer.last_used))  # fmt: skip
    out.print(table)
    out.print(f"{len(layers)} agent layer(s); `pier sweep --images --older-than 7d` removes unused ones")


def prune_layers(backend: SandboxBackend, older_than: str, now: float | None = None) -> int:
    """Remove every layer unused for older_than (kept while a sandbox uses it)."""
    cutoff = (time.time() if now is None else now) - parse_age(older_than)
    removed = 0
    for layer in backend.list_layers():
        if last_use(layer) > cutoff:
            continue
        if backend.remove_layer(layer.image):
            removed += 1
            out.print(f"removed agent layer {layer.image} ({layer.name} {layer.version} on {layer.base}), "
                      f"last used {_when(last_use(layer))}", highlight=False)  # fmt: skip
        else:
            out.print(f"kept agent layer {layer.image}: a sandbox uses it", highlight=False)
    out.print(f"{removed} agent layer(s) removed")
    return removed


def _when(epoch: float | None) -> str:
    if not epoch:
        return ""
    return datetime.fromtimestamp(epoch, UTC).astimezone().isoformat(sep=" ", timespec="seconds")
