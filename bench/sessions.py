"""The cost, in seconds, of keeping a sandbox, continuing in it and saving it
as a snapshot, against the baseline of the same runbook in a fresh sandbox, in
the same process on the same engine (the script agent; no model):

- fresh: a run that creates its sandbox and deletes it (the default);
- keep: the same run with keep_sandbox (its end deletes nothing);
- continue: a follow-up run in the kept sandbox (no image, no create);
- pause, resume: the kept sandbox frozen and thawed (`pier sandbox pause|resume`:
  the compare-and-set hold on the run's record and the engine's pause), each
  a step, not a run;
- snapshot save: the kept sandbox committed as a snapshot of the collection;
- from snapshot: a run whose sandbox starts from that snapshot;
- with a volume: the fresh run with one of the collection's volumes mounted
  (`volumes: {cache: {path: /opt/cache}}`; made by the first, reused after).

Each figure is the median of --repeat runs' wall time (the run record's
duration_seconds), and, for continue and snapshot save, their own step.

    uv run python bench/sessions.py [--image pier-base:bookworm] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

from pier.lifecycle.sessions import pause_kept, save_snapshot, snapshot_ref
from pier.lifecycle.start import RunRequest, Services, run
from pier.lifecycle.volumes import list_volumes
from pier.runbook import parse
from pier.tasks import task_from_runbook

STEPS = ("pause", "resume", "snapshot save")  # commands on a kept sandbox, not runs
SCRIPT = "mkdir -p /opt/work && date > /opt/work/stamp && echo ok > /app/results/ok.txt"


def runbook(image: str) -> str:
    return f'---\nagent: script\nsnapshot: ""\nimage: "{image}"\n---\n# bench\n\n```bash\n{SCRIPT}\n```\n'


def go(services: Services, text: str, collection: str, **params: object):
    task = task_from_runbook(parse(text))
    record = run(services, RunRequest(collection=collection, task_name="bench", task=task, run_params=params))
    assert record.success, record.error
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    services = Services()
    backend = services.backend
    collection = f"bench-{uuid.uuid4().hex[:8]}"
    text = runbook(args.image)
    figures: dict[str, list[float]] = {
        k: []
        for k in (
            "fresh",
            "keep",
            "continue",
            "pause",
            "resume",
            "snapshot save",
            "from snapshot",
            "with a volume",
        )
    }
    with_volume = text.replace("agent: script\n", "agent: script\nvolumes: {cache: {path: /opt/cache}}\n")
    go(services, text, collection)  # warm: the image looked up once
    for index in range(args.repeat):
        figures["fresh"].append(go(services, text, collection).duration_seconds or 0)
        kept = go(services, text, collection, keep_sandbox=True)
        figures["keep"].append(kept.duration_seconds or 0)
        then = go(services, text, collection, keep_sandbox=True, continue_from=kept.trajectory_id)
        figures["continue"].append(then.duration_seconds or 0)
        for verb, pause in (("pause", True), ("resume", False)):
            began = time.monotonic()
            pause_kept(services.store, backend, collection, then.trajectory_id, pause)
            figures[verb].append(time.monotonic() - began)
        name = f"bench-{index}"
        began = time.monotonic()
        save_snapshot(services.store, backend, collection, then.trajectory_id, name)
        figures["snapshot save"].append(time.monotonic() - began)
        started = go(
            services,
            text.replace(f'image: "{args.image}"', "image: null").replace(
                'snapshot: ""', f"snapshot: {name}"
            ),
            collection,
        )
        figures["from snapshot"].append(started.duration_seconds or 0)
        figures["with a volume"].append(go(services, with_volume, collection).duration_seconds or 0)
        backend.remove(kept.outputs.sandbox.id or "")
        backend.remove_image(snapshot_ref(collection, name))
    for volume in list_volumes(backend, collection):
        backend.remove_volume(volume.engine_name)
    base = statistics.median(figures["fresh"])
    print(f"{'':16} {'median s':>9} {'vs fresh':>9}   (n={args.repeat}, image {args.image})")
    for key, values in figures.items():
        median = statistics.median(values)
        versus = "" if key in STEPS else f"{median - base:+9.2f}"  # a step, not a run
        print(f"{key:16} {median:9.2f} {versus:>9}")


if __name__ == "__main__":
    main()
