"""Stopping what an agent left running: when it ends, and again before checks.

The sandbox's keep-alive is spared: the child docker-init (pid 1) started, the
only process besides pid 1 born in pid 1's session. Every exec starts a session
of its own and no process can join a session it was not born in, so nothing the
agent starts can pass for it (by name, by start time, by anything it controls);
should the keep-alive fork, only the oldest of pid 1's session is spared.
Without an init, pid 1 is the keep-alive itself and nothing else is spared.
Where pid 1's session cannot be read (0: outside the sandbox's namespace), the
oldest process that is not this script's own ancestor is spared instead.
(Sparing the oldest process was the whole rule once, and wrong: under load the
engine can start an exec before docker-init has forked the keep-alive; the
keep-alive, killed then, took the sandbox with it.)

This script's own ancestors (the exec's `timeout` wrapper) and their other
children (its comsubs; the `tee` beside an agent) are spared too: killing them
would end the exec early or lose output. Processes are frozen first so none can
fork away, then killed; this repeats until nothing else is left. Prints the
number stopped."""

# `stat PID` leaves in $line the fields of /proc/PID/stat after "PID (comm) "
# (comm may hold spaces and parentheses; the last ") " ends it): after
# `set -- $line`, $2 is the ppid, $4 the session, $20 the start time. Builtins
# only, no process per process looked at: the script runs at every agent's end.
STOP_PROCESSES_SCRIPT = r"""
self=${BASHPID:-$$}
stat() { line=""; { read -r line < "/proc/$1/stat"; } 2>/dev/null; line=${line##*") "}; }
mine=" "; pid=$self
while [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$pid" != 1 ]; do
  mine="$mine$pid "; stat "$pid"; set -- $line; pid=${2:-}
done
stat 1; set -- $line; session=${4:-}
[ "$session" = 0 ] && session=""
keep=""; oldest=""
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  [ "$pid" = 1 ] && continue
  case "$mine" in *" $pid "*) continue;; esac
  stat "$pid"; set -- $line; [ -n "${20:-}" ] || continue
  [ -n "$session" ] && [ "$4" != "$session" ] && continue
  if [ -z "$oldest" ] || [ "${20}" -lt "$oldest" ] || { [ "${20}" -eq "$oldest" ] && [ "$pid" -lt "$keep" ]; }; then
    oldest=${20}; keep=$pid
  fi
done
others() {
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    case "$pid" in 1|"$keep") continue;; esac
    case "$mine" in *" $pid "*) continue;; esac
    stat "$pid"; set -- $line; [ -n "${2:-}" ] || continue
    case "$mine" in *" $2 "*) continue;; esac
    echo "$pid"
  done
}
total=0
for round in 1 2 3 4 5; do
  victims=$(others)
  [ -z "$victims" ] && break
  for pid in $victims; do total=$((total + 1)); done
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


def through_term(command: str) -> str:
    """`command` (a pipeline's right side, e.g. `tee`) with SIGTERM ignored: at the
    agent's time limit its process group gets SIGTERM, and the `tee` that keeps
    its log must outlive it to keep what the agent writes in its grace."""
    return f"{{ trap '' TERM; exec {command}; }}"
