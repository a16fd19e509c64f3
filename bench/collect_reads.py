"""collect's reads of a small run's three output folders: the engine's archive
read per folder (get_archive + extract_stream, three calls, what collect did
first) against one `tar -c` of the three streamed out of the sandbox
(exec_stdout + extract_routed). Then collect's whole work in the sandbox: its
look inside (size, folders, special files) as an exec of its own and then the
tar exec (what collect did before), against the look and the tar as one exec
(pier.lifecycle.collect.COLLECT: what it does now).

Makes one sandbox (runc, or --runtime runsc) holding what a burst's run leaves
(/logs/agent with a log, /app/results/out.txt, an empty /app/assets), then
times ROUNDS rounds, each reading the three folders every way (rotating which
goes first), and prints each way's median and p90 and the ratios tar / archives
and one exec / two, with the load average. Needs a Docker engine and the image:

    uv run python bench/collect_reads.py [--rounds 30] [--image pier-base:bookworm] [--runtime runc]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pier.lifecycle.collect import COLLECT
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.tarutil import extract_routed, extract_stream
from pier.settings import Settings

FOLDERS = {"logs": "/logs/agent", "results": "/app/results", "assets": "/app/assets"}
LOOK_ONLY = COLLECT[: COLLECT.index('echo "$0"')] + "true"  # the look without the tar after it
MARKER = "pier-collect-bench"


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


def look_then_tar(sandbox, dest: Path) -> None:  # type: ignore[no-untyped-def]
    assert sandbox.exec(LOOK_ONLY, workdir="/").ok
    by_tar(sandbox, dest)


def look_and_tar(sandbox, dest: Path) -> None:  # type: ignore[no-untyped-def]
    routes = {path.lstrip("/"): dest / name for name, path in FOLDERS.items()}
    end = f"{MARKER}\n".encode()
    with sandbox.exec_stdout(["bash", "-c", COLLECT, MARKER]) as stream:
        head = b""
        for chunk in stream:
            head += chunk
            if end in head:
                break
        rest = head[head.index(end) + len(end) :]
        assert b"bytes " in head[: head.index(end)], head
        extract_routed(itertools.chain([rest], stream), routes)
        for _padding in stream:
            pass
        assert stream.result().ok, stream.result()


WAYS = {
    "archives": (by_archives, "three archive reads (baseline)"),
    "tar": (by_tar, "one tar -c exec"),
    "two": (look_then_tar, "look exec, then tar exec (before)"),
    "one": (look_and_tar, "look and tar in one exec (now)"),
}


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
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    load_before = os.getloadavg()
    try:
        made = sandbox.exec("mkdir -p /logs/agent /app/results /app/assets && echo 'first line' > "
                            "/logs/agent/agent.log && echo hello > /app/results/out.txt", workdir="/")  # fmt: skip
        assert made.ok, made
        for n in range(args.rounds):
            order = list(WAYS)[n % len(WAYS) :] + list(WAYS)[: n % len(WAYS)]
            for way in order:
                dest = work / f"{way}-{n}"
                began = time.perf_counter()
                WAYS[way][0](sandbox, dest)
                times[way].append(time.perf_counter() - began)
                assert (dest / "results" / "out.txt").read_bytes() == b"hello\n"
                shutil.rmtree(dest)
    finally:
        sandbox.delete()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"{args.rounds} rounds on {args.image} ({args.runtime}); load average before / after: "
          f"{' '.join(f'{x:.2f}' for x in load_before)} / {' '.join(f'{x:.2f}' for x in load_after)}")  # fmt: skip
    for way, (_read, label) in WAYS.items():
        ms = sorted(t * 1000 for t in times[way])
        print(
            f"{label:<34} median {statistics.median(ms):6.1f} ms   p90 {ms[int(len(ms) * 0.9) - 1]:6.1f} ms"
        )
    median = statistics.median
    print(f"ratio tar / archives (medians): {median(times['tar']) / median(times['archives']):.2f}")
    print(f"ratio one exec / two (medians): {median(times['one']) / median(times['two']):.2f}")


if __name__ == "__main__":
    main()
