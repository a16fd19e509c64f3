"""What gVisor's own options do to a sandbox's start and to file-heavy work, on
this machine's runsc, without touching the engine's configuration.

The engine runs runsc with the flags registered for it (daemon.json's
runtimeArgs; here `--network=host`); changing those changes every sandbox on
the engine. So this bench runs runsc directly (`runsc do`) on the image's root
filesystem exported to a folder (writes go to that folder through gVisor's
gofer, as a container's go to its layer), once per flag set, interleaved in
each round, and prints medians against runc doing the same in the same round
(`docker run --runtime runc`, the engine's baseline) and against runsc with no
extra flag:

- start: `runsc do true`, the sandbox's boot to its first command's end;
- file-heavy: 2,000 small files written, read and removed (bench/runtime.py's job).

Flag sets: the default (exclusive file access, overlay as registered), `--file-access=shared`
(the gofer revalidates every lookup: what a host-side write needs to be seen),
`--overlay2=root:memory` (the root's writes held in the sandbox's memory: the
disk guard no longer sees them, they count against memory), `--network=none`
and `--network=host`, and `--platform=kvm` where /dev/kvm works (skipped after
a start that times out). Needs root, runsc and docker.

    uv run python bench/runsc_options.py [--rounds 5] [--image pier-base:bookworm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

FILE_JOB = (
    "cd /tmp && mkdir -p f && for i in $(seq 2000); do echo $i > f/$i; done && cat f/* > /dev/null && rm -r f"
)
SETS = {
    "default (as registered: --network=host)": ["--network=host"],
    "--network=none": ["--network=none"],
    "--file-access=shared": ["--network=host", "--file-access=shared"],
    "--overlay2=root:memory": ["--network=host", "--overlay2=root:memory"],
    "--platform=kvm": ["--network=host", "--platform=kvm"],
}
LABEL = ["--label", "pier.bench=runsc-options"]


def timed(argv: list[str], timeout: float) -> float | None:
    began = time.perf_counter()
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"{' '.join(argv[:4])}... failed: {exc.stderr.decode(errors='replace')[-300:]}"
        ) from exc
    return time.perf_counter() - began


def runsc(flags: list[str], root: Path, command: str, timeout: float) -> float | None:
    argv = [
        "runsc",
        *flags,
        "do",
        "-root",
        str(root),
        "-force-overlay=false",
        "-quiet",
        "--",
        "/bin/bash",
        "-c",
        command,
    ]
    return timed(argv, timeout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--image", default=os.environ.get("PIER_BASE_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pier-bench-runsc-"))
    try:
        root = work / "rootfs"
        root.mkdir()
        cid = subprocess.check_output(["docker", "create", *LABEL, args.image, "true"], text=True).strip()
        try:
            with subprocess.Popen(["docker", "export", cid], stdout=subprocess.PIPE) as export:
                subprocess.run(["tar", "-x", "-C", str(root)], stdin=export.stdout, check=True)
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
        report(args, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(args: argparse.Namespace, root: Path) -> None:
    start: dict[str, list[float]] = {name: [] for name in ["runc (docker run)", *SETS]}
    files: dict[str, list[float]] = {name: [] for name in start}
    broken: set[str] = set()
    loads = [os.getloadavg()[0]]
    docker = ["docker", "run", "--rm", "--runtime", "runc", *LABEL, args.image, "bash", "-c"]
    for n in range(args.rounds + 1):
        names = list(start)
        for name in names[n % len(names) :] + names[: n % len(names)]:
            if name in broken:
                continue
            if name in SETS:
                began = runsc(SETS[name], root, "true", args.timeout)
                heavy = runsc(SETS[name], root, FILE_JOB, args.timeout) if began is not None else None
                base = runsc(SETS[name], root, "true", args.timeout) if heavy is not None else None
            else:
                began = timed([*docker, "true"], args.timeout)
                heavy = timed([*docker, FILE_JOB], args.timeout)
                base = timed([*docker, "true"], args.timeout)
            if began is None or heavy is None or base is None:
                broken.add(name)
                print(f"{name}: no answer in {args.timeout:.0f} s; left out", flush=True)
                continue
            if n:  # the first round warms every way up
                start[name].append(began)
                files[name].append(heavy - base)  # the job alone: its run less a bare start
        loads.append(os.getloadavg()[0])
    med = statistics.median
    print(f"{args.rounds} rounds, {args.image}, load average {min(loads):.1f}-{max(loads):.1f}, medians:")
    runc_start, runc_files = med(start["runc (docker run)"]), med(files["runc (docker run)"])
    default = "default (as registered: --network=host)"
    print(f"{'':44}{'start':>9}{'file-heavy':>12}{'vs runc':>16}{'vs default':>16}")
    for name in start:
        if name in broken or not start[name]:
            print(f"{name:44}   (no answer: {'skipped'})")
            continue
        s, f = med(start[name]), med(files[name])
        vs_default = (
            "" if name not in SETS else f"{s / med(start[default]):7.2f}x {f / med(files[default]):6.2f}x"
        )
        print(f"{name:44}{s:8.3f}s{f:11.3f}s{s / runc_start:8.2f}x {f / runc_files:6.2f}x {vs_default}")


if __name__ == "__main__":
    main()
