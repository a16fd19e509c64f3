"""Agent CLI install time, per agent: from a bare image (no Node, no CLI: pier
installs Node where the CLI needs it, then the pinned CLI) and from an image that
already has the CLI at the pinned version (pier checks the version and uses it).

Needs a Docker engine, the base image (default pier-base:bookworm) and the
package registries. The image with every CLI is the one the integration tests
use (built once by pier's installer, reused while the pins stay).

    uv run python bench/agent_install.py [--image pier-base:bookworm] [--agents codex,hermes]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.agent_image import build_agent_image

from pier.agents import get_agent
from pier.agents.install import InstallSpec, run_install
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings

AGENTS = ("claude-code", "codex", "opencode", "gemini-cli", "hermes")


def timed_install(backend: DockerBackend, image: str, spec: InstallSpec) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="pier-base:bookworm", help="the bare image")
    parser.add_argument("--agents", default=",".join(AGENTS))
    args = parser.parse_args()
    backend = DockerBackend(Settings())
    specs = {name: get_agent(name).install_spec for name in args.agents.split(",")}  # type: ignore[attr-defined]
    print("building (or finding) the image with every pinned CLI ...", flush=True)
    ready = build_agent_image(
        backend, args.image, [get_agent(n).install_spec for n in AGENTS], log=lambda _: None
    )  # type: ignore[attr-defined]
    print(f"{'agent':<12} {'version':<9} {'bare image':>11} {'CLI present':>12}")
    for name, spec in specs.items():
        bare = timed_install(backend, args.image, spec)
        present = timed_install(backend, ready, spec)
        print(f"{name:<12} {spec.pin.version:<9} {bare:>10.1f}s {present:>11.2f}s", flush=True)


if __name__ == "__main__":
    main()
