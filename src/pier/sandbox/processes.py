"""Stopping what an agent left running: when it ends, and again before checks.

The sandbox's own keep-alive process is the oldest process after pid 1 (nothing
the agent starts can be older), so it is found by start time, not by name, which
the agent could imitate. This script's own ancestors (the exec's `timeout`
wrapper) and their other children (its comsubs; the `tee` beside an agent) are
spared: killing them would end the exec early or lose output. Processes are
frozen first so none can fork away, then killed; this repeats until nothing
else is left. Prints the number stopped."""

STOP_PROCESSES_SCRIPT = r"""
self=${BASHPID:-$$}
starttime() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
parent() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }
mine=" "; pid=$self
while [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$pid" != 1 ]; do mine="$mine$pid "; pid=$(parent "$pid"); done
keep=""; oldest=""
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  [ "$pid" = 1 ] && continue
  st=$(starttime "$pid"); [ -n "$st" ] || continue
  if [ -z "$oldest" ] || [ "$st" -lt "$oldest" ]; then oldest=$st; keep=$pid; fi
done
others() {
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    case "$pid" in 1|"$keep") continue;; esac
    case "$mine" in *" $pid "*) continue;; esac
    ppid=$(parent "$pid")
    case "$mine" in *" $ppid "*) continue;; esac
    [ -n "$ppid" ] && echo "$pid"
  done
}
total=0
for round in 1 2 3 4 5; do
  victims=$(others)
  [ -z "$victims" ] && break
  total=$((total + $(echo "$victims" | wc -l)))
  kill -STOP $victims 2>/dev/null
  kill -KILL $victims 2>/dev/null
  sleep 0.2
done
echo "$total"
"""


def stop_leftovers_after(command: str) -> str:
    """`command` as a group that ends with the command's own exit: then whatever it
    left running is stopped (a server started with `&` keeps the output pipe open,
    so `| tee` after it would wait until the time limit), and the group exits with
    the command's code. Meant for the left side of the agent's `| tee`."""
    return (
        f"{{ {command}\n__pier_status=$?\n"
        f"( {STOP_PROCESSES_SCRIPT} ) >/dev/null 2>&1\n"
        'exit "$__pier_status"; }'
    )
