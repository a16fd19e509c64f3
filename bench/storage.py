"""Collect + publish: a run's results copied out of a sandbox into scratch and
published to storage (a local folder, then S3), against plain copies of the
same bytes in the same run.

Makes one sandbox, writes SIZE MiB of random bytes in it (one file, or FILES
files), then, each in a fresh child process whose peak RSS the kernel reports
(wait4):

- pier local: collect (get_archive + extract_stream into scratch) and publish
  to a file:// storage (what a run does at collect and save);
- pier S3: the same, publishing to PIER_BENCH_S3_URL (default PIER_TEST_S3_URL;
  start a server with scripts/start-s3.sh);
- baselines: `docker cp` of the same folder out of the same sandbox, and a plain
  boto3 upload (one upload_file call per file, default settings) of the same
  files, after a 32 MiB warm-up upload that neither is timed on.

Prints MB/s, pier / baseline ratios and peak RSS. Needs a Docker engine and the
image (default pier-base:bookworm). Keep SIZE small on a shared machine:

    uv run python bench/storage.py [--size-mib 256] [--files 1] [--image pier-base:bookworm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MIB = 1 << 20

PIER = """
import sys, time
from pathlib import Path
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.tarutil import extract_stream
from pier.settings import Settings
from pier.storage import open_storage

container, scratch, url = sys.argv[1:4]
storage = open_storage(url)
sandbox = DockerSandbox(DockerBackend(Settings()).api, container, "local engine")
began = time.perf_counter()
extract_stream(sandbox.get_archive("/app/results"), Path(scratch) / "results")
collected = time.perf_counter()
storage.publish(Path(scratch), "bench/run/" + Path(scratch).name)
print(collected - began, time.perf_counter() - collected)
"""

BOTO3 = """
import os, sys, time
from pathlib import Path
import boto3
from pier.storage.s3 import split_url

folder, url = sys.argv[1:3]
bucket, prefix = split_url(url)
client = boto3.client("s3")
began = time.perf_counter()
for path in sorted(Path(folder).rglob("*")):
    if path.is_file():
        client.upload_file(str(path), bucket, f"{prefix}/plain/{path.relative_to(folder).as_posix()}")
print(0, time.perf_counter() - began)
"""


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def child(code: str, *args: str) -> tuple[float, float, float]:
    """(first seconds, second seconds, peak RSS MiB) of a fresh Python process."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"the child {args} failed")
        out.seek(0)
        first, second = (float(x) for x in out.read().decode().split())
        return first, second, usage.ru_maxrss / 1024


def timed(*command: str) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - began


def clear_s3(url: str) -> None:
    from pier.storage import open_storage

    storage = open_storage(url)
    storage.delete("bench")
    storage.delete("plain")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    args = parser.parse_args()
    s3 = os.environ.get("PIER_BENCH_S3_URL") or os.environ.get("PIER_TEST_S3_URL")
    size = args.size_mib * MIB
    name = f"pier-bench-storage-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--label", "pier.bench=storage", args.image, "sleep", "infinity")
    work = Path(tempfile.mkdtemp(prefix="pier-bench-storage-"))
    s3_run = f"{s3.rstrip('/')}/bench-{uuid.uuid4().hex[:8]}" if s3 else None
    try:
        per_file = size // args.files
        docker("exec", name, "sh", "-c", f"mkdir -p /app/results && cd /app/results && "
               f"head -c {size} /dev/urandom | split -a 6 -b {per_file} - f")  # fmt: skip
        mb = size / 1e6
        print(f"{args.size_mib} MiB in {args.files} file(s)")
        cp_s = timed("docker", "cp", f"{name}:/app/results", str(work / "cp"))
        collect_s, publish_s, rss = child(PIER, name, str(work / "scratch-local"), (work / "store").as_uri())
        total = collect_s + publish_s
        print(f"local  pier collect+publish {mb / total:7.1f} MB/s (collect {collect_s:.2f}s, publish "
              f"{publish_s:.2f}s)   docker cp {mb / cp_s:7.1f} MB/s   ratio {total / cp_s:.2f}   "
              f"peak RSS {rss:.0f} MiB")  # fmt: skip
        if not s3_run:
            print("S3     skipped: set PIER_TEST_S3_URL (scripts/start-s3.sh prints it)")
            return
        warm = work / "warm"  # a fresh server allocates its volumes on the first writes: not measured
        warm.mkdir()
        (warm / "w.bin").write_bytes(os.urandom(32 * MIB))
        child(BOTO3, str(warm), s3_run)
        _, plain_s, plain_rss = child(BOTO3, str(work / "cp"), s3_run)
        collect_s, publish_s, rss = child(PIER, name, str(work / "scratch-s3"), s3_run)
        print(f"S3     pier collect+publish {mb / (collect_s + publish_s):7.1f} MB/s (collect {collect_s:.2f}s, "
              f"publish {publish_s:.2f}s = {mb / publish_s:.1f} MB/s)   plain boto3 upload {mb / plain_s:7.1f} MB/s"
              f"   publish/plain {publish_s / plain_s:.2f}   peak RSS pier {rss:.0f} MiB, plain {plain_rss:.0f} MiB")  # fmt: skip
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)
        if s3_run:
            clear_s3(s3_run)


if __name__ == "__main__":
    main()
