"""An image with Node and every pinned agent CLI, for the agent tests: pier's own
agent layers (an image built FROM the base with each install script run once),
one on top of the other, so it is rebuilt only when a pin or the installer
changes, and never holds anything of a run."""

from __future__ import annotations

from collections.abc import Callable

from pier.agents.install import InstallSpec, install_script
from pier.sandbox.base import LayerRecipe
from pier.sandbox.docker.backend import DockerBackend


def build_agent_image(
    backend: DockerBackend,
    base_image: str,
    specs: list[InstallSpec],
    log: Callable[[str], None] = print,
    timeout: float = 1500,
) -> str:
    """The tag of an image from base_image with every spec installed (built once)."""
    image = base_image
    for spec in specs:
        recipe = LayerRecipe(name=spec.agent, version=spec.pin.version, script=install_script(spec))
        image = backend.ensure_layer(image, recipe, log, timeout).image
    return image
