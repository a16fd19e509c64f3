"""Named snapshots: the built-in recipes in sandbox/recipes/ and the user's
snapshots file, whose entries override built-ins of the same name:

    snapshots:
      report-env: {image: ghcr.io/acme/report-env:1.4.2, description: ...}
      my-tools:   {dockerfile: "FROM ...", description: ...}
      big-env:    {dockerfile_path: envs/big.Dockerfile}   # relative to the file

Recipe text may use {{base_image}} (settings.snapshot_base_image), {{ca_setup}}
(installs the CA bundle pier puts in the build context as pier-ca.crt) and
{{uv_version}}; built-ins also use the shared steps in recipes/_*.Dockerfile:
{{uv_install}}, {{python312}}, {{node_install}}, {{playwright_chromium}},
{{playwright_mcp}}, {{agent_clis}} (each agent CLI at its pin, one layer each,
from pier.agents.install's own script) and {{facts}} (/etc/pier/snapshot.json,
what the image has, read from it after the build).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pier.errors import InputError
from pier.sandbox.base import SandboxBackend, SandboxSource
from pier.sandbox.dockerfile import UV_VERSION, ca_setup_lines, check_image_ref, read_ca_bundle, recipe_tag
from pier.settings import Settings

BUILTIN_SNAPSHOTS = {
    "python312-uv": "Python 3.12, pip, uv, C/Fortran toolchain, Node 22 + npm, git, curl, "
    "Chromium + Playwright + its MCP server, the agent CLIs (the default)",
    "prism-playwright": "Playwright + Chromium for browser-heavy work: fonts, Xvfb, "
    "chromedriver, Node 22, Python 3.12 with uv, the agent CLIs",
}
# Names the platform gives a built-in snapshot under another name: the same
# snapshot (the same recipe, so the same image). A user's entry of that name wins.
SNAPSHOT_ALIASES = {"python312-uv-node": "python312-uv"}
# The agent CLIs a built-in snapshot carries at pier's pins (pier.agents.pins).
SNAPSHOT_AGENTS = ("claude-code", "codex", "opencode", "hermes")
LABEL_AGENTS = "pier.agents"  # "name=version,..." of the CLIs the image has at their pins
LABEL_MCP = "pier.mcp_servers"  # JSON: MCP servers the image offers every agent
FACTS_PATH = "/etc/pier/snapshot.json"
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
    facts: dict[str, str] = field(default_factory=dict)  # versions read from the built image
    shortfalls: tuple[str, ...] = ()  # what it promises and the image lacks


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


def render_recipe(text: str, base_image: str, ca_bundle: bool, python_mirror: str = "") -> str:
    """Fill a recipe's placeholders; text without them comes back unchanged.
    Raises InputError when base_image is no image reference (it is a line's end)
    or python_mirror no plain URL."""
    check_image_ref("PIER_SNAPSHOT_BASE_IMAGE", base_image)
    check_mirror(python_mirror)
    values = {
        "base_image": base_image,
        "ca_setup": "\n".join(ca_setup_lines(ca_bundle)),
        "uv_version": UV_VERSION,
        "uv_install": _fragment("_uv"),
        "python312": _fragment("_python312").replace("{{python_mirror}}", python_mirror),
        "node_install": _fragment("_node22"),
        "playwright_chromium": _fragment("_playwright_chromium"),
        "playwright_mcp": _fragment("_playwright_mcp"),
    }
    if "{{agent_clis}}" in text or "{{facts}}" in text:
        values["agent_clis"], agent_facts = _agent_steps()
        values["facts"] = _fragment("_facts").replace("{{agent_facts}}", agent_facts)
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


_MIRROR = re.compile(r"(https?|file)://[A-Za-z0-9._~:/?#@!&()*+,;=%-]+", re.ASCII)


def check_mirror(url: str) -> None:
    """PIER_PYTHON_INSTALL_MIRROR is empty or one plain URL (it is put in a recipe
    between single quotes). Raises InputError saying what to write."""
    if url and not _MIRROR.fullmatch(url):
        raise InputError(
            f"PIER_PYTHON_INSTALL_MIRROR={url!r} is not a plain http(s):// or file:// URL "
            "(no spaces or quotes): give the base URL of a python-build-standalone mirror"
        )


def _fragment(name: str) -> str:
    return _recipe_text(name).rstrip("\n")


def _agent_steps() -> tuple[str, str]:
    """One build step per agent CLI (pier's own installer script, so a snapshot and
    a run-time install agree on pins and method), the label naming them, and the
    facts lines that read their versions back."""
    from pier.agents import get_agent  # the agents' package loads only for a built-in recipe

    steps, pins, facts = [], [], []
    for name in SNAPSHOT_AGENTS:
        agent = get_agent(name)
        recipe = agent.layer()
        if recipe is None:  # pragma: no cover - every SNAPSHOT_AGENTS entry installs a CLI
            continue
        script = base64.b64encode(recipe.script.encode()).decode()
        steps += [
            f"# pier-step: {recipe.title or recipe.name}",
            f"RUN echo {script} | base64 -d > /tmp/pier-install.sh && bash /tmp/pier-install.sh "
            "&& rm -rf /tmp/pier-install.sh /root/.npm /root/.cache/uv /root/.cache/pip",
        ]
        pins.append(f"{recipe.name}={recipe.version}")
        binary = agent.install_spec.binary  # type: ignore[attr-defined]
        facts.append(f"      v {recipe.name} '{binary} --version 2>/dev/null'; \\")
    steps.append(f'LABEL {LABEL_AGENTS}="{",".join(pins)}"')
    return "\n".join(steps), "\n".join(facts)


def load_builtin_snapshots(base_image: str, ca_bundle: bool, python_mirror: str = "") -> dict[str, Snapshot]:
    return {
        name: Snapshot(
            name=name,
            description=description,
            dockerfile=render_recipe(_recipe_text(name), base_image, ca_bundle, python_mirror),
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


# What each built-in promises, checked against the versions read from the built
# image (/etc/pier/snapshot.json): a version prefix, or "" for "present".
_COMMON = {"python3": "3.12", "node": "22", "uv": UV_VERSION, "git": "", "curl": "", "chromium": "",
           "playwright": "", "playwright-mcp": ""}  # fmt: skip
_COMMON.update(dict.fromkeys(SNAPSHOT_AGENTS, ""))
PROMISES: dict[str, dict[str, str]] = {
    "python312-uv": {**_COMMON, "gcc": "", "gfortran": ""},
    "prism-playwright": dict(_COMMON),
}


def image_mcp_servers(labels: Mapping[str, str]) -> dict[str, Any]:
    """The MCP servers an image offers every agent (its pier.mcp_servers label:
    name -> {command, args, env}), or {} when it offers none or the label is not
    such an object."""
    try:
        servers = json.loads(labels.get(LABEL_MCP) or "{}")
    except ValueError:
        return {}
    if not isinstance(servers, dict):
        return {}
    return {
        str(name): spec for name, spec in servers.items() if isinstance(spec, dict) and spec.get("command")
    }


def parse_facts(data: bytes | None) -> dict[str, str]:
    """/etc/pier/snapshot.json as a dict (empty when missing or unreadable)."""
    if not data:
        return {}
    try:
        facts = json.loads(data)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in facts.items()} if isinstance(facts, dict) else {}


def promise_shortfalls(name: str, facts: dict[str, str]) -> list[str]:
    """What built-in snapshot `name` promises and the image's facts do not show,
    one sentence each (none for a snapshot that promises nothing)."""
    promised = PROMISES.get(name)
    if promised is None or not facts:
        return []
    missing = []
    for tool, prefix in promised.items():
        have = facts.get(tool, "")
        if not have:
            missing.append(f"{name} promises {tool} but the image has none")
        elif prefix and not (have == prefix or have.startswith(prefix + ".")):
            hint = (
                " (no Python 3.12 source answered the build: set PIER_PYTHON_INSTALL_MIRROR, or a "
                "PIER_SNAPSHOT_BASE_IMAGE with python3.12, then `pier snapshot build " + name + "` again)"
                if tool == "python3"
                else ""
            )
            missing.append(f"{name} promises {tool} {prefix}; the image has {have}{hint}")
    return missing


def facts_summary(facts: dict[str, str]) -> str:
    """The versions read from an image, one line: `python3 3.11.2, node 22.23.5, ...`."""
    return ", ".join(f"{tool} {version}" for tool, version in facts.items() if tool != "built" and version)


_FACTS: dict[str, dict[str, str]] = {}


class SnapshotCatalog:
    """Every snapshot a run can name; user entries override built-ins."""

    def __init__(self, settings: Settings):
        ca_bundle = settings.ca_bundle is not None
        self._ca_path = settings.ca_bundle
        self._snapshots = {
            **load_builtin_snapshots(settings.snapshot_base_image, ca_bundle, settings.python_install_mirror),
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

    def facts(self, backend: SandboxBackend, ref: str) -> dict[str, str]:
        """The versions read from the built image ref (its /etc/pier/snapshot.json),
        remembered per ref in this process (a recipe's tag is its content hash)."""
        if ref not in _FACTS:
            _FACTS[ref] = parse_facts(backend.image_file(ref, FACTS_PATH))
        return _FACTS[ref]

    def list(self, backend: SandboxBackend) -> list[SnapshotStatus]:
        """Every snapshot, by name, with whether its image is on the engine already."""
        statuses = []
        for name in self.names():
            snapshot = self._snapshots[name]
            ref = self.image_ref(snapshot)
            built = backend.image_exists(ref)
            facts = self.facts(backend, ref) if built else {}
            shortfalls = promise_shortfalls(name, facts) if snapshot.origin == "built-in" else []
            statuses.append(
                SnapshotStatus(
                    name=name,
                    description=snapshot.description,
                    kind=snapshot.kind,
                    image=ref,
                    built=built,
                    origin=snapshot.origin,
                    facts=facts,
                    shortfalls=tuple(shortfalls),
                )
            )
        return statuses
