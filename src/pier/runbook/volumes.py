"""The frontmatter's `volumes:`: a collection's named volumes a run mounts
(docs/sessions.md#volumes).

```yaml
volumes:
  datasets: {path: /data, read_only: true}
  cache: {path: /root/.cache}
```

A name is the volume's name in its collection (the engine's name is derived
from the collection and it, by pier.lifecycle.volumes); a path is where the
sandbox sees it. Both are checked here, before any sandbox exists: a name is
short and plain, a path is absolute and normal (no `..`, no `.`, no `//`), and
never over a folder pier's run needs (what pier collects, its own files, the
agent's logs) nor the system's (the root, `/proc`, `/usr`, ...), or one that
holds them."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

VOLUME_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
MAX_VOLUMES = 16  # in one runbook

# Where pier's run lives: a volume may not be mounted there, under it or over it.
RUN_PATHS = ("/app/results", "/app/assets", "/app/checks", "/logs", "/run/pier")
# The system's: a volume may not be mounted there or over it (or under the kernel's).
SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/run",
                "/sbin", "/sys", "/usr", "/var", "/tmp", "/app", "/root", "/home", "/opt")  # fmt: skip
KERNEL_PATHS = ("/proc", "/sys", "/dev")


class VolumeDecl(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    read_only: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        problem = path_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def path_problem(path: str) -> str | None:
    """Why a volume may not be mounted at `path`; None when it may."""
    if not isinstance(path, str) or not path.startswith("/"):
        return f"path {path!r} must be absolute (start with /), e.g. /data"
    if "\x00" in path or any(ch in path for ch in ":,\n\r"):
        return f"path {path!r} holds a character a mount cannot take (':', ',', a newline, NUL)"
    if posixpath.normpath(path) != path or path.startswith("//"):
        return f"path {path!r} is not normal: no '..', '.', '//' or trailing '/' (write it as {posixpath.normpath(path)})"
    if len(path) > 255:
        return f"path {path!r} is longer than 255 characters"
    for folder in RUN_PATHS:
        if _under(path, folder) or _under(folder, path):
            return f"path {path} would mount over {folder}, which pier's run uses; choose another folder, e.g. /data"
    for folder in KERNEL_PATHS:
        if _under(path, folder):
            return f"path {path} is under {folder}, the kernel's; choose another folder, e.g. /data"
    if path == "/" or path in SYSTEM_PATHS:
        return f"path {path} would hide the system's {path}; mount below it instead, e.g. {path.rstrip('/')}/data"
    return None


def name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not VOLUME_NAME.fullmatch(name):
        return (
            f"volume name {name!r} is not allowed: lowercase letters, digits, '_' and '-', "
            "starting with a letter or digit, at most 63"
        )
    return None


def check_volumes(value: Any) -> dict[str, Any]:
    """The `volumes:` mapping as given, its names checked (its entries are
    checked by VolumeDecl); ValueError saying what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("volumes must be a mapping of name: {path: /folder, read_only: true|false}")
    if len(value) > MAX_VOLUMES:
        raise ValueError(f"at most {MAX_VOLUMES} volumes in one runbook, got {len(value)}")
    for name in value:
        problem = name_problem(name)
        if problem:
            raise ValueError(problem)
    paths: dict[str, str] = {}
    for name, decl in value.items():
        path = decl.get("path") if isinstance(decl, dict) else None
        if isinstance(path, str):
            for other_path, other in paths.items():
                if _under(path, other_path) or _under(other_path, path):
                    raise ValueError(
                        f"volumes {other} ({other_path}) and {name} ({path}) overlap: mount each apart"
                    )
            paths[path] = name
    return value
