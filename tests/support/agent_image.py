"""An image with Node and every pinned agent CLI, made once by pier's own install
code in a sandbox and committed, then reused by every agent test. It is tagged by
a hash of the install scripts, so a changed pin or installer makes a new one."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from pier.agents.install import InstallSpec, install_script, run_install
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend

AGENT_IMAGE_REPO = "pier-test/agents"


def image_tag(base_image: str, specs: list[InstallSpec]) -> str:
    digest = hashlib.sha256(base_image.encode())
    for spec in specs:
        digest.update(install_script(spec).encode())
    return f"{AGENT_IMAGE_REPO}:{digest.hexdigest()[:16]}"


def build_agent_image(
    backend: DockerBackend,
    base_image: str,
    specs: list[InstallSpec],
    log: Callable[[str], None] = print,
    timeout: float = 1500,
) -> str:
    """The tag of an image from base_image with every spec installed (built once)."""
    tag = image_tag(base_image, specs)
    if backend.image_exists(tag):
        return tag
    spec = SandboxSpec(
        image=base_image,
        limits=Limits(cpus=2, memory="6G", disk=None),
        labels={LABEL_RUN: f"agent-image-{int(time.time())}"},
    )
    sandbox = backend.create(spec)
    try:
        deadline = time.monotonic() + timeout
        for install in specs:
            run_install(sandbox, install, log, timeout=max(deadline - time.monotonic(), 60))
        sandbox.exec("rm -rf /root/.npm /root/.cache/pip /tmp/*", workdir="/")
        repo, _, version = tag.partition(":")
        backend.api.commit(sandbox.id, repository=repo, tag=version)
    finally:
        sandbox.delete()
    return tag
