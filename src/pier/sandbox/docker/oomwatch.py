"""An out-of-memory killer for gVisor sandboxes.

Under runc the host kernel kills the process that went past the memory limit and
the sandbox lives on. gVisor's processes are not host processes: the host sees
only the Sentry (gVisor's kernel) in the container's cgroup, so the host's OOM
killer kills the Sentry and with it the whole sandbox, and gVisor has no OOM
killer of its own. So on runsc (cgroup v1, where the engine can turn the
kernel's killer off for a container) pier plays it:

- the container is created with the kernel's OOM killer off: at the limit its
  allocations wait instead (the cgroup is "under_oom");
- a poller (OomWatch) sees that, lifts the limit by HEADROOM so the sandbox can
  run a command, kills the largest process inside it (as the kernel would have),
  counts the kill (oom_killed() reads it), and puts the limit back once usage is
  under it again. If that does not free memory, the kernel's killer is turned
  back on: the sandbox ends, as it would have without pier.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import docker

log = logging.getLogger(__name__)

POLL_S = 0.1
HEADROOM = 64 << 20
SETTLE_S = 5.0
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")

# The largest resident process but init (1) and this shell, killed.
KILL_LARGEST = r"""
best=; max=0
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = 1 ] || [ "$pid" = $$ ] && continue
  rss=$(cut -d' ' -f2 "$p/statm" 2>/dev/null) || continue
  [ -n "$rss" ] && [ "$rss" -gt "$max" ] && { max=$rss; best=$pid; }
done
[ -n "$best" ] && kill -9 "$best"
"""


def memory_cgroup(pid: int) -> Path | None:
    """The cgroup v1 memory folder of a host process, or None (cgroup v2, gone)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = CGROUP_ROOT / path.lstrip("/")
            return folder if (folder / "memory.oom_control").exists() else None
    return None


def can_watch() -> bool:
    """Whether this host has cgroup v1's memory controller, where the kernel's OOM
    killer can be off for one container."""
    return (CGROUP_ROOT / "memory.oom_control").exists()


@dataclass
class Watched:
    container_id: str
    cgroup: Path
    limit: int
    kills: int = 0


class OomWatch:
    def __init__(self, api: docker.APIClient):
        self._api = api
        self._watched: dict[str, Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, container_id: str, limit: int) -> None:
        """Watch a started container whose kernel OOM killer is off."""
        pid = int(self._api.inspect_container(container_id)["State"]["Pid"])
        cgroup = memory_cgroup(pid)
        if cgroup is None:
            return
        with self._lock:
            self._watched[container_id] = Watched(container_id, cgroup, limit)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="pier-oom-watch", daemon=True)
                self._thread.start()

    def kills(self, container_id: str) -> int:
        with self._lock:
            found = self._watched.get(container_id)
        return found.kills if found else 0

    def discard(self, container_id: str) -> None:
        with self._lock:
            self._watched.pop(container_id, None)

    def _watch(self) -> None:
        pause = threading.Event()
        while True:
            with self._lock:
                watched = list(self._watched.values())
                if not watched:
                    self._thread = None
                    return
            for item in watched:
                try:
                    if _under_oom(item.cgroup):
                        self._relieve(item)
                except FileNotFoundError:  # the container is gone
                    self.discard(item.container_id)
                except Exception as exc:  # one sandbox's trouble never stops the watch
                    log.warning("OOM watch on %s: %s", item.container_id[:12], exc)
            pause.wait(POLL_S)

    def _relieve(self, item: Watched) -> None:
        _set_limit(item.cgroup, item.limit + HEADROOM)
        exec_id = self._api.exec_create(item.container_id, ["sh", "-c", KILL_LARGEST])["Id"]
        self._api.exec_start(exec_id)
        item.kills += 1
        log.info(
            "sandbox %s went past its memory limit: its largest process was killed", item.container_id[:12]
        )
        deadline = time.monotonic() + SETTLE_S
        while _usage(item.cgroup) >= item.limit and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if _usage(item.cgroup) >= item.limit:  # nothing freed: let the kernel end the sandbox
            (item.cgroup / "memory.oom_control").write_text("0")
            _set_limit(item.cgroup, item.limit)
            self.discard(item.container_id)
            return
        _set_limit(item.cgroup, item.limit)


def _under_oom(cgroup: Path) -> bool:
    return "under_oom 1" in (cgroup / "memory.oom_control").read_text()


def _usage(cgroup: Path) -> int:
    return int((cgroup / "memory.usage_in_bytes").read_text())


def _set_limit(cgroup: Path, limit: int) -> None:
    """Memory and memory+swap limits, in the order the kernel accepts (memsw >= memory)."""
    memsw = cgroup / "memory.memsw.limit_in_bytes"
    memory = cgroup / "memory.limit_in_bytes"
    if limit > int(memory.read_text()):
        if memsw.exists():
            memsw.write_text(str(limit))
        memory.write_text(str(limit))
    else:
        memory.write_text(str(limit))
        if memsw.exists():
            memsw.write_text(str(limit))
