"""The detached process that builds an agent layer off a run's path
(layers.start_build starts it): `python -m pier.sandbox.docker.layer_build JOB`.
It holds the layer's build lock its starter handed it (an inherited descriptor)
until it exits, so the build stays single and a waiter knows when it is over.
Its output (the install's lines, then the verdict) goes to the build log."""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import docker

from pier.errors import ImageError
from pier.sandbox.base import LayerRecipe
from pier.sandbox.docker.client import API_TIMEOUT_S
from pier.sandbox.docker.layers import build_layer, failed_build_path


def main(job_path: str) -> int:
    path = Path(job_path)
    job = json.loads(path.read_text())
    path.unlink(missing_ok=True)
    # job["lock_fd"], inherited, holds the layer's lock until this process ends.
    if job["docker_host"]:
        api = docker.APIClient(base_url=job["docker_host"], timeout=API_TIMEOUT_S)
    else:
        api = docker.from_env(timeout=API_TIMEOUT_S).api
    ca = base64.b64decode(job["ca"]) if job["ca"] else None
    began = time.monotonic()
    try:
        build_layer(api, job["image"], job["image_id"], job["tag"], LayerRecipe(**job["recipe"]), ca,
                    lambda line: print(line, flush=True), float(job["timeout"]))  # fmt: skip
    except (ImageError, docker.errors.DockerException) as exc:
        print(f"pier: the background build of {job['tag']} failed: {exc}", flush=True)
        failed_build_path(path.parent, job["tag"]).touch()  # later runs do not start it again at once
        return 1
    failed_build_path(path.parent, job["tag"]).unlink(missing_ok=True)
    print(f"pier: built {job['tag']} in {time.monotonic() - began:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
