"""Collect and place: pier's archive copies against `docker cp` of the same bytes.

Makes one sandbox, writes SIZE MiB of random bytes in it (one file, or FILES
files), then times, in this one run:

- collect: pier's get_archive + extract_stream into a folder (what the collect
  stage does), in a child process whose peak RSS the kernel reports (wait4);
- `docker cp` of the same folder out of the same sandbox;
- place: pier's put_archive of a tar of those files streamed from disk, against
  `docker cp` of the same files into the sandbox.

Prints MB/s for each, pier / docker cp ratios, and the child's peak RSS. Needs a
Docker engine and the image (default pier-base:bookworm). Keep SIZE small on a
shared machine:

    uv run python bench/collect.py [--size-mib 256] [--files 1] [--image pier-base:bookworm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

MIB = 1 << 20

CHILD = """
import sys, time
from pathlib import Path
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.tarutil import extract_stream, file_chunks
from pier.settings import Settings

mode, container, arg = sys.argv[1:4]
sandbox = DockerSandbox(DockerBackend(Settings()).api, container, "local engine")
began = time.perf_counter()
if mode == "collect":
    extract_stream(sandbox.get_archive("/app/results"), Path(arg))
else:
    with open(arg, "rb") as stream:
        sandbox.put_archive("/app/placed", file_chunks(stream))
print(time.perf_counter() - began)
"""


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def child(mode: str, container: str, arg: str) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of pier's copy, in a fresh process."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, container, arg], stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"pier's {mode} failed")
        out.seek(0)
        return float(out.read().decode().strip()), usage.ru_maxrss / 1024


def timed(*args: str) -> float:
    began = time.perf_counter()
    docker(*args)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    args = parser.parse_args()
    size = args.size_mib * MIB
    name = f"pier-bench-collect-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--label", "pier.bench=collect", args.image, "sleep", "infinity")
    work = Path(tempfile.mkdtemp(prefix="pier-bench-collect-"))
    try:
        per_file = size // args.files
        docker("exec", name, "sh", "-c", f"mkdir -p /app/results && cd /app/results && "
               f"for i in $(seq {args.files}); do head -c {per_file} /dev/urandom > f$i.bin; done")  # fmt: skip
        pier_s, pier_rss = child("collect", name, str(work / "pier"))
        cp_s = timed("cp", f"{name}:/app/results", str(work / "cp"))
        tar_path = work / "place.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(work / "cp", arcname="results")
        place_s, place_rss = child("place", name, str(tar_path))
        docker("exec", name, "mkdir", "-p", "/app/placed-cp")
        cp_in_s = timed("cp", str(work / "cp"), f"{name}:/app/placed-cp/")  # the same files
        mb = size / 1e6
        print(f"{args.size_mib} MiB in {args.files} file(s)")
        print(f"collect  pier {mb / pier_s:7.1f} MB/s   docker cp {mb / cp_s:7.1f} MB/s   "
              f"ratio {pier_s / cp_s:.2f}   peak RSS {pier_rss:.0f} MiB")  # fmt: skip
        print(f"place    pier {mb / place_s:7.1f} MB/s   docker cp {mb / cp_in_s:7.1f} MB/s   "
              f"ratio {place_s / cp_in_s:.2f}   peak RSS {place_rss:.0f} MiB")  # fmt: skip
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
