"""Agent set-up time, per agent, with and without agent layers, in the same run:

- per run (the baseline): pier installs Node where the CLI needs it, then the
  pinned CLI, in the run's own sandbox, every run (PIER_AGENT_LAYERS=false);
- first run: the agent layer is built (the same install script, once, in an image
  FROM the run's);
- second run: the layer is found and used; set up installs nothing.

On a bare image (a fresh copy of --image, so no layer exists yet) and, with
--snapshot, on that snapshot's image (built first if missing). Then a pin change
(another version in the recipe) must build a new layer. Set-up time here is what
a run spends on its agent before it starts (the sandbox's create is the same in
every case and not counted). Needs a Docker engine and the package registries.

    uv run python bench/agent_install.py [--image pier-base:bookworm] [--agents codex,hermes]
                                         [--snapshot python312-uv]
"""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid
from dataclasses import replace

from pier.agents import get_agent
from pier.agents.install import InstallSpec, run_install
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings

AGENTS = ("claude-code", "codex", "opencode", "gemini-cli", "hermes")


def per_run_install(backend: DockerBackend, image: str, spec: InstallSpec) -> float:
    """Today's set-up without layers: the install in the run's sandbox."""
    sandbox = backend.create(
        SandboxSpec(
            image=image,
            limits=Limits(cpus=2, memory="4G", disk=None),
            labels={LABEL_RUN: f"bench-install-{uuid.uuid4().hex[:8]}"},
        )
    )
    try:
        began = time.perf_counter()
        run_install(sandbox, spec, lambda line: None, timeout=600)
        return time.perf_counter() - began
    finally:
        sandbox.delete()


def layer_run(backend: DockerBackend, image: str, agent: str) -> tuple[float, str, bool]:
    """A run's set-up with layers: (seconds, the layer, whether it was built). A
    backend of its own, as a new `pier run` process has (nothing known yet)."""
    recipe = get_agent(agent).layer()
    fresh = DockerBackend(Settings())
    fresh.ping()  # connected, as a run's backend is before create
    began = time.perf_counter()
    layer = fresh.ensure_layer(image, recipe, lambda line: None, 900)
    return time.perf_counter() - began, layer.image, layer.built_s is not None


def fresh_copy(image: str) -> str:
    """image under a new id (one label more), so that no layer exists for it yet."""
    tag = f"pier-bench/layer-base:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {image}\nLABEL pier.bench.copy={tag.rsplit(':', 1)[1]}\n"
    subprocess.run(["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, text=True, check=True,
                   capture_output=True)  # fmt: skip
    return tag


def drop(backend: DockerBackend, image: str) -> None:
    for layer in backend.list_layers():
        if layer.base == image:
            backend.remove_layer(layer.image)
    subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def measure(backend: DockerBackend, label: str, image: str, agents: list[str]) -> None:
    print(f"\n{label}: {image}")
    print(f"{'agent':<12} {'version':<9} {'per run':>9} {'1st run':>9} {'1st/per run':>12} {'2nd run':>9}")
    for name in agents:
        spec: InstallSpec = get_agent(name).install_spec  # type: ignore[attr-defined]
        baseline = per_run_install(backend, image, spec)
        first, layer, built = layer_run(backend, image, name)
        second, again, rebuilt = layer_run(backend, image, name)
        assert built and not rebuilt and layer == again, (built, rebuilt, layer, again)
        print(f"{name:<12} {spec.pin.version:<9} {baseline:>8.1f}s {first:>8.1f}s {first / baseline:>11.2f}x "
              f"{second * 1000:>7.0f}ms", flush=True)  # fmt: skip


def pin_change(backend: DockerBackend, image: str, agent: str) -> None:
    recipe = get_agent(agent).layer()
    before = backend.ensure_layer(image, recipe, lambda line: None, 900).image
    changed = replace(recipe, version=f"{recipe.version}-bench", script=recipe.script + "# another pin\n")
    began = time.perf_counter()
    after = backend.ensure_layer(image, changed, lambda line: None, 900)
    took = time.perf_counter() - began
    verdict = (
        "a new layer was built" if after.image != before and after.built_s is not None else "NOT REBUILT"
    )
    print(f"\npin change ({agent} {recipe.version} -> {changed.version}): {verdict} in {took:.1f}s "
          f"({before} -> {after.image})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="pier-base:bookworm", help="the bare image")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--snapshot", default="", help="also on this snapshot (built if missing)")
    args = parser.parse_args()
    settings = Settings()
    backend = DockerBackend(settings)
    agents = args.agents.split(",")
    copies = [fresh_copy(args.image)]
    try:
        measure(backend, "bare image (a fresh copy)", copies[0], agents)
        pin_change(backend, copies[0], agents[0])
        if args.snapshot:
            snapshot = SnapshotCatalog(settings).get(args.snapshot)
            assert snapshot is not None, f"no snapshot {args.snapshot}"
            print(f"\nbuilding (or finding) snapshot {args.snapshot} ...", flush=True)
            ref = backend.ensure_image(snapshot.source(), lambda line: None, settings.create_timeout_sec)
            copies.append(fresh_copy(ref))
            measure(backend, f"snapshot {args.snapshot} (a fresh copy)", copies[-1], agents)
    finally:
        for copy in copies:
            drop(backend, copy)


if __name__ == "__main__":
    main()
