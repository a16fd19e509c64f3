"""Named snapshots: the built-in recipes in sandbox/recipes/ and the user's
snapshots file, whose entries override built-ins of the same name:

    snapshots:
      report-env: {image: ghcr.io/acme/report-env:1.4.2, description: ...}
      my-tools:   {dockerfile: "FROM ...", description: ...}
      big-env:    {dockerfile_path: envs/big.Dockerfile}   # relative to the file

Recipe text may use {{base_image}} (settings.snapshot_base_image), {{ca_setup}}
(installs the CA bundle pier puts in the build context as pier-ca.crt) and
{{uv_version}}; built-ins also use {{node_install}}.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pier.errors import InputError
from pier.sandbox.base import SandboxBackend, SandboxSource
from pier.sandbox.dockerfile import UV_VERSION, ca_setup_lines, check_image_ref, read_ca_bundle, recipe_tag
from pier.settings import Settings

BUILTIN_SNAPSHOTS = {
    "python312-uv": "Python 3.12, pip, uv, C/Fortran toolchain, Node 22 + npm, git, curl, "
    "Chromium + Playwright (the default)",
    "prism-playwright": "Playwright + Chromium for browser-heavy work: fonts, Xvfb, "
    "chromedriver, Node 22, Python with uv",
}
# Names the platform gives a built-in snapshot under another name: the same
# snapshot (the same recipe, so the same image). A user's entry of that name wins.
SNAPSHOT_ALIASES = {"python312-uv-node": "python312-uv"}
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Snapshot:
    name: str
    description: str
    image: str | None = None
    dockerfile: str | None = None
    origin: str = "built-in"  # or the snapshots file that defines it

    @property
    def kind(self) -> Literal["image", "dockerfile"]:
        return "image" if self.image else "dockerfile"

    def source(self) -> SandboxSource:
        return SandboxSource(
            kind="snapshot",
            name=self.name,
            image=self.image,
            dockerfile=self.dockerfile,
            log_line=f"Creating sandbox from snapshot: {self.name}",
        )


@dataclass(frozen=True)
class SnapshotStatus:
    name: str
    description: str
    kind: Literal["image", "dockerfile"]
    image: str  # the ref used, or the tag a recipe builds to
    built: bool
    origin: str


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(None, min_length=1)
    dockerfile: str | None = Field(None, min_length=1)
    dockerfile_path: str | None = Field(None, min_length=1)
    description: str = ""

    @model_validator(mode="after")
    def _exactly_one_source(self) -> _Entry:
        given = [k for k in ("image", "dockerfile", "dockerfile_path") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of image, dockerfile, dockerfile_path")
        return self


class _SnapshotsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    snapshots: dict[str, _Entry] = Field(default_factory=dict)


@cache
def _recipe_text(name: str) -> str:
    return resources.files("pier.sandbox").joinpath(f"recipes/{name}.Dockerfile").read_text()


def render_recipe(text: str, base_image: str, ca_bundle: bool) -> str:
    """Fill a recipe's placeholders; text without them comes back unchanged.
    Raises InputError when base_image is no image reference (it is a line's end)."""
    check_image_ref("PIER_SNAPSHOT_BASE_IMAGE", base_image)
    node = _recipe_text("_node22")
    values = {
        "base_image": base_image,
        "ca_setup": "\n".join(ca_setup_lines(ca_bundle)),
        "uv_version": UV_VERSION,
        "node_install": node.rstrip("\n"),
    }
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def load_builtin_snapshots(base_image: str, ca_bundle: bool) -> dict[str, Snapshot]:
    return {
        name: Snapshot(
            name=name,
            description=description,
            dockerfile=render_recipe(_recipe_text(name), base_image, ca_bundle),
        )
        for name, description in BUILTIN_SNAPSHOTS.items()
    }


def _parse_snapshots_file(path: Path) -> _SnapshotsFile:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return _SnapshotsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        where = f"snapshot {loc[1]!r}" if len(loc) >= 2 and loc[0] == "snapshots" else "top level"
        field = ".".join(str(part) for part in loc[2:])
        detail = f"{field}: {first['msg']}" if field else first["msg"]
        raise InputError(f"{path}: {where}: {detail}") from exc


def _entry_dockerfile(path: Path, name: str, entry: _Entry) -> str | None:
    if entry.dockerfile or not entry.dockerfile_path:
        return entry.dockerfile
    recipe = path.parent / entry.dockerfile_path
    try:
        return recipe.read_text()
    except OSError as exc:
        raise InputError(
            f"{path}: snapshot {name!r}: dockerfile_path {recipe} cannot be read ({exc.strerror})"
        ) from exc


def load_user_snapshots(path: Path, base_image: str, ca_bundle: bool) -> dict[str, Snapshot]:
    """The snapshots defined in path (none when it does not exist). Raises InputError
    naming the file and the entry when it is malformed."""
    if not path.is_file():
        return {}
    found: dict[str, Snapshot] = {}
    for name, entry in _parse_snapshots_file(path).snapshots.items():
        if not _NAME.fullmatch(name):
            raise InputError(f"{path}: snapshot {name!r}: a name is lowercase letters, digits, '.', '_', '-'")
        dockerfile = _entry_dockerfile(path, name, entry)
        found[name] = Snapshot(
            name=name,
            description=entry.description,
            image=entry.image,
            dockerfile=render_recipe(dockerfile, base_image, ca_bundle) if dockerfile else None,
            origin=str(path),
        )
    return found


class SnapshotCatalog:
    """Every snapshot a run can name; user entries override built-ins."""

    def __init__(self, settings: Settings):
        ca_bundle = settings.ca_bundle is not None
        self._ca_path = settings.ca_bundle
        self._snapshots = {
            **load_builtin_snapshots(settings.snapshot_base_image, ca_bundle),
            **load_user_snapshots(settings.snapshots_file, settings.snapshot_base_image, ca_bundle),
        }

    def get(self, name: str) -> Snapshot | None:
        return self._snapshots.get(name) or self._snapshots.get(SNAPSHOT_ALIASES.get(name, ""))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def names(self) -> list[str]:
        return sorted(self._snapshots)

    def image_ref(self, snapshot: Snapshot) -> str:
        """The image a snapshot runs on: its ref, or the tag its recipe builds to."""
        if snapshot.image:
            return snapshot.image
        assert snapshot.dockerfile is not None
        return recipe_tag(snapshot.name, snapshot.dockerfile, self._ca_bytes)

    @cached_property
    def _ca_bytes(self) -> bytes | None:
        return read_ca_bundle(self._ca_path)

    def list(self, backend: SandboxBackend) -> list[SnapshotStatus]:
        """Every snapshot, by name, with whether its image is on the engine already."""
        statuses = []
        for name in self.names():
            snapshot = self._snapshots[name]
            ref = self.image_ref(snapshot)
            statuses.append(
                SnapshotStatus(
                    name=name,
                    description=snapshot.description,
                    kind=snapshot.kind,
                    image=ref,
                    built=backend.image_exists(ref),
                    origin=snapshot.origin,
                )
            )
        return statuses
