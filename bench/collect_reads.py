"""collect's reads of a small run's three output folders: the engine's archive
read per folder (get_archive + extract_stream, three calls, what collect did
before) against one `tar -c` of the three streamed out of the sandbox
(exec_stdout + extract_routed, what it does where the sandbox has tar).

Makes one sandbox (runc, or --runtime runsc) holding what a burst's run leaves
(/logs/agent with a log, /app/results/out.txt, an empty /app/assets), then
times ROUNDS rounds, each reading the three folders both ways (alternating which
goes first), and prints each way's median and p90 and the ratio tar / archives,
with the load average. Needs a Docker engine and the image:

    uv run python bench/collect_reads.py [--rounds 30] [--image pier-base:bookworm] [--runtime runc]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.tarutil import extract_routed, extract_stream
from pier.settings import Settings

FOLDERS = {"logs": "/logs/agent", "results": "/app/results", "assets": "/app/assets"}


def by_archives(sandbox, dest: Path) -> None:  # type: ignore[no-untyped-def]
    for name, path in FOLDERS.items():
        extract_stream(sandbox.get_archive(path), dest / name)


def by_tar(sandbox, dest: Path) -> None:  # type: ignore[no-untyped-def]
    routes = {path.lstrip("/"): dest / name for name, path in FOLDERS.items()}
    with sandbox.exec_stdout(["tar", "-c", "-f", "-", "-C", "/", *routes]) as stream:
        extract_routed(stream, routes)
        for _padding in stream:
            pass
        assert stream.result().ok, stream.result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--runtime", default="runc", choices=["runc", "runsc"])
    args = parser.parse_args()
    backend = DockerBackend(Settings(sandbox_runtime=None if args.runtime == "runc" else args.runtime))
    labels = {LABEL_RUN: f"bench-collect-reads-{uuid.uuid4().hex[:8]}", "pier.bench": "collect-reads"}
    spec = SandboxSpec(image=args.image, limits=Limits(disk=None), labels=labels)
    sandbox = backend.create(spec)
    work = Path(tempfile.mkdtemp(prefix="pier-bench-collect-reads-"))
    times: dict[str, list[float]] = {"archives": [], "tar": []}
    ways = {"archives": by_archives, "tar": by_tar}
    load_before = os.getloadavg()
    try:
        made = sandbox.exec("mkdir -p /logs/agent /app/results /app/assets && echo 'first line' > "
                            "/logs/agent/agent.log && echo hello > /app/results/out.txt", workdir="/")  # fmt: skip
        assert made.ok, made
        for n in range(args.rounds):
            order = ["archives", "tar"] if n % 2 == 0 else ["tar", "archives"]
            for way in order:
                dest = work / f"{way}-{n}"
                began = time.perf_counter()
                ways[way](sandbox, dest)
                times[way].append(time.perf_counter() - began)
                assert (dest / "results" / "out.txt").read_bytes() == b"hello\n"
                shutil.rmtree(dest)
    finally:
        sandbox.delete()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"{args.rounds} rounds on {args.image} ({args.runtime}); load average before / after: "
          f"{' '.join(f'{x:.2f}' for x in load_before)} / {' '.join(f'{x:.2f}' for x in load_after)}")  # fmt: skip
    for way, label in (("archives", "three archive reads (baseline)"), ("tar", "one tar -c exec")):
        ms = sorted(t * 1000 for t in times[way])
        print(
            f"{label:<32} median {statistics.median(ms):6.1f} ms   p90 {ms[int(len(ms) * 0.9) - 1]:6.1f} ms"
        )
    ratio = statistics.median(times["tar"]) / statistics.median(times["archives"])
    print(f"ratio tar / archives (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
