"""Where a run's sandbox comes from: the first of snapshot, image and
generated Dockerfile that applies, with the log line the run shows and notes on
what was asked for but has no effect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pier.outbound import OutboundPolicy
from pier.sandbox.base import SandboxSource
from pier.sandbox.dockerfile import generate_recipe
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings


def registry_of(ref: str) -> tuple[str, int] | None:
    """The registry host and port an image ref names (`127.0.0.1:5000/x:1`,
    `ghcr.io/org/x`), by the engine's rule: the part before the first `/` is a
    registry when it holds a `.` or a `:` or is `localhost`. None for Docker Hub."""
    first, slash, _ = ref.strip().partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        return None
    if first.startswith("["):  # [v6]:port
        host, _, rest = first[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = first.partition(":")
    return host, int(port) if port.isdigit() else 443


def check_registries(policy: OutboundPolicy, refs: dict[str, str | None]) -> None:
    """Raises OutboundRefused (naming the field) when an image ref a run gives
    points the engine at a registry on a refused address. The engine connects by
    itself, so pier checks at accept and again just before it pulls or builds."""
    for field_name, ref in refs.items():
        where = registry_of(ref) if ref else None
        if where is not None:
            policy.check_name(*where, field_name)


def _given(value: str | None) -> str | None:
    """An empty or blank value means unset: a run sends `"snapshot": ""` to clear it."""
    value = (value or "").strip()
    return value or None


def _ignored_note(source: str, base_image: str | None, apt: Sequence[str], pip: Sequence[str]) -> str | None:
    named = [
        key
        for key, value in (
            ("base_image", base_image),
            ("apt_packages", apt),
            ("pip_packages", pip),
        )
        if value
    ]
    if not named:
        return None
    return (
        f"{' and '.join(named)} had no effect: the sandbox comes from {source}, which "
        "already contains its packages; they apply only to a generated Dockerfile "
        "(clear snapshot and image to use them)"
    )


def _with_notes(source: SandboxSource, notes: list[str]) -> SandboxSource:
    return replace(source, notes=source.notes + tuple(notes))


def source_notes(
    *,
    snapshot: str | None,
    image: str | None,
    base_image: str | None,
    apt_packages: Sequence[str],
    pip_packages: Sequence[str],
    catalog: SnapshotCatalog,
) -> list[str]:
    """What a run's sandbox source would warn about (an unknown snapshot, packages
    a snapshot or an image ignores): resolve_source's notes, known before anything
    runs (pier validate says them too)."""
    snapshot, image, base = _given(snapshot), _given(image), _given(base_image)
    if snapshot and catalog.get(snapshot) is not None:
        ignored = _ignored_note(f"snapshot {snapshot!r}", base, apt_packages, pip_packages)
        return [ignored] if ignored else []
    notes: list[str | None] = []
    if snapshot:
        fallback = f"image {image}" if image else "a generated Dockerfile"
        notes.append(
            f"snapshot {snapshot!r} not found, falling through to {fallback} "
            f"(the snapshots pier knows: {', '.join(catalog.names())}; see `pier snapshot list`)"
        )
    if image:
        notes.append(_ignored_note(f"image {image}", base, apt_packages, pip_packages))
    return [note for note in notes if note]


def resolve_source(
    *,
    snapshot: str | None,
    image: str | None,
    base_image: str | None,
    apt_packages: Sequence[str],
    pip_packages: Sequence[str],
    catalog: SnapshotCatalog,
    settings: Settings,
) -> SandboxSource:
    """The sandbox source for a run, the first that applies: snapshot, image, a
    generated Dockerfile. Raises InputError when the generated Dockerfile would get
    an invalid base image or package name."""
    notes = source_notes(
        snapshot=snapshot, image=image, base_image=base_image, apt_packages=apt_packages,
        pip_packages=pip_packages, catalog=catalog,
    )  # fmt: skip
    snapshot, image, base = _given(snapshot), _given(image), _given(base_image)
    found = catalog.get(snapshot) if snapshot else None
    if found is not None:
        return _with_notes(found.source(), notes)
    if image:
        source = SandboxSource(
            kind="image",
            name=image,
            image=image,
            log_line=f"Creating sandbox from registry image: {image}",
        )
        return _with_notes(source, notes)
    base = base or settings.base_image
    recipe = generate_recipe(base, apt_packages, pip_packages, ca_bundle=settings.ca_bundle is not None)
    source = SandboxSource(
        kind="dockerfile",
        name="generated",
        dockerfile=recipe.dockerfile,
        files=recipe.files,
        log_line=f"Creating sandbox from generated Dockerfile (base: {base})",
    )
    return _with_notes(source, notes)
