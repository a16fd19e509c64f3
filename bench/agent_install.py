"""Agent set-up time, per agent, with and without agent layers, in the same run:

- per run (the baseline): pier installs Node where the CLI needs it, then the
  pinned CLI, in the run's own sandbox, every run (PIER_AGENT_LAYERS=false);
- first run (what a run with open network does): no layer yet, so the sandbox
  installs as in the baseline and the layer's build starts in a detached process
  after; "layer ready" is when that build ended, counted from the run's start;
- first run waiting (a run without open network): the layer is built (the same
  install script, once, in an image FROM the run's) while the run waits;
- second run: the layer is found and used; set up installs nothing.

On a bare image (a fresh copy of --image, so no layer exists yet) and, with
--snapshot, on that snapshot's image (built first if missing). Then a pin change
(another version in the recipe) must build a new layer. Set-up time here is what
a run spends on its agent before it starts (the sandbox's create is the same in
every case and not counted). Needs a Docker engine and the package registries.

    uv run python bench/agent_install.py [--image pier-base:bookworm] [--agents codex,hermes]
                                         [--snapshot python312-uv] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import uuid
from dataclasses import replace
from typing import Any

from pier.agents import get_agent
from pier.agents.install import InstallSpec, run_install
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings

AGENTS = ("claude-code", "codex", "opencode", "gemini-cli", "hermes")


def bench_sandbox(backend: DockerBackend, image: str) -> Any:
    """A sandbox of the image as a run's, labelled as this bench's."""
    return backend.create(
        SandboxSpec(
            image=image,
            limits=Limits(cpus=2, memory="4G", disk=None),
            labels={LABEL_RUN: f"bench-install-{uuid.uuid4().hex[:8]}"},
        )
    )


def per_run_install(backend: DockerBackend, image: str, spec: InstallSpec) -> float:
    """Today's set-up without layers: the install in the run's sandbox."""
    sandbox = bench_sandbox(backend, image)
    try:
        began = time.perf_counter()
        run_install(sandbox, spec, lambda line: None, timeout=600)
        return time.perf_counter() - began
    finally:
        sandbox.delete()


def layer_run(backend: DockerBackend, image: str, agent: str) -> tuple[float, str, bool]:
    """A run's set-up that waits for the layer: (seconds, the layer, whether it was
    built). A backend of its own, as a new `pier run` process has (nothing known yet)."""
    recipe = get_agent(agent).layer()
    fresh = DockerBackend(Settings())
    fresh.ping()  # connected, as a run's backend is before create
    began = time.perf_counter()
    layer = fresh.ensure_layer(image, recipe, lambda line: None, 900)
    return time.perf_counter() - began, layer.image, layer.built_s is not None


def first_run(
    backend: DockerBackend, image: str, agent: str, spec: InstallSpec
) -> tuple[float, float, float]:
    """A first run with open network: (its set-up seconds, of which not the install
    (the layer's lookup and the build's start), seconds from its start until the
    layer it started building is ready)."""
    recipe = get_agent(agent).layer()
    fresh = DockerBackend(Settings())
    fresh.ping()
    sandbox = bench_sandbox(backend, image)
    try:
        began = time.perf_counter()
        layer = fresh.ensure_layer(image, recipe, lambda line: None, 900, wait=False)
        assert not layer.ready, f"{layer.image} exists already"
        installing = time.perf_counter()
        run_install(sandbox, spec, lambda line: None, timeout=600)
        install = time.perf_counter() - installing
        assert fresh.start_layer_build(image, recipe, 900), "a build of it was under way already"
        set_up = time.perf_counter() - began
    finally:
        sandbox.delete()  # while the build goes on, as the run's agent would
    assert fresh.wait_for_layer_build(image, recipe, 900), "the background build failed"
    return set_up, set_up - install, time.perf_counter() - began


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


def measure(backend: DockerBackend, label: str, image: str, agents: list[str], repeat: int) -> None:
    """Each figure the median of `repeat` rounds, the cases taking turns in each round
    (the machine's load moves between them less than between blocks of one case)."""
    print(f"\n{label}: {image} (medians of {repeat})")
    print(f"{'agent':<12} {'version':<9} {'per run':>8} {'1st run':>8} {'/per run':>8} {'ready at':>8} "
          f"{'1st, waits':>10} {'/per run':>8} {'2nd run':>8} {'layer cost in 1st':>17}")  # fmt: skip
    for name in agents:
        spec: InstallSpec = get_agent(name).install_spec  # type: ignore[attr-defined]
        rounds = []
        for _ in range(repeat):
            baseline = per_run_install(backend, image, spec)
            first, extra, ready = first_run(backend, image, name, spec)
            second, layer, rebuilt = layer_run(backend, image, name)
            assert not rebuilt, "the layer the first run started was not used"
            assert backend.remove_layer(layer)
            waited, again, built = layer_run(backend, image, name)
            assert built and again == layer, (built, again, layer)
            assert backend.remove_layer(layer)  # the next round starts with no layer
            rounds.append((baseline, first, ready, waited, second, extra))
        base, first, ready, waited, second, extra = (
            statistics.median(column) for column in zip(*rounds, strict=True)
        )
        print(f"{name:<12} {spec.pin.version:<9} {base:>7.1f}s {first:>7.1f}s {first / base:>7.2f}x "
              f"{ready:>7.1f}s {waited:>9.1f}s {waited / base:>7.2f}x {second * 1000:>6.0f}ms {extra * 1000:>15.0f}ms",
              flush=True)  # fmt: skip
        if repeat > 1:
            print("  rounds (per run, 1st run, ready at, 1st waits): " + "; ".join(
                f"{b:.1f} {f:.1f} {r:.1f} {w:.1f}" for b, f, r, w, _, _ in rounds))  # fmt: skip


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
    parser.add_argument("--repeat", type=int, default=1, help="rounds per agent (medians printed)")
    args = parser.parse_args()
    settings = Settings()
    backend = DockerBackend(settings)
    agents = args.agents.split(",")
    print("load average (1, 5, 15 min) at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    copies = [fresh_copy(args.image)]
    try:
        measure(backend, "bare image (a fresh copy)", copies[0], agents, args.repeat)
        pin_change(backend, copies[0], agents[0])
        if args.snapshot:
            snapshot = SnapshotCatalog(settings).get(args.snapshot)
            assert snapshot is not None, f"no snapshot {args.snapshot}"
            print(f"\nbuilding (or finding) snapshot {args.snapshot} ...", flush=True)
            ref = backend.ensure_image(snapshot.source(), lambda line: None, settings.create_timeout_sec)
            copies.append(fresh_copy(ref))
            measure(backend, f"snapshot {args.snapshot} (a fresh copy)", copies[-1], agents, args.repeat)
    finally:
        for copy in copies:
            drop(backend, copy)
        print("load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
