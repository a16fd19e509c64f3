"""The sandbox's keep-alive, which takes the sandbox's first archive on its stdin.

Every sandbox needs a process that keeps it up (`sleep infinity`, under
docker-init). Before it sleeps, it reads one tar from its standard input and
extracts it at / from inside the sandbox: set-up's archive (the folders, the
attached files, the agent's files, the CA bundle create deferred) reaches the
sandbox through the attach stream the engine already holds for the container,
instead of the engine's archive call, which on Docker 20.10 starts a process
of the engine's own binary per archive to unpack it (about 70 ms and as much
engine CPU per run, more under load; docs/speed.md), or, on gVisor, an exec.

The channel is used once (the container is created with StdinOnce: the engine
closes the keep-alive's stdin when the first attach ends). Whatever happens on
the way, the keep-alive ends up sleeping: an image without tar drains the
archive and says so (the caller then sends it the engine's way), a failed tar
drains the rest and says why. The keep-alive prints nothing before it has read
its stdin to the end, then one status block the caller waits for:

    pier-setup <tar's exit code, or "notar">
    <tar's messages>
    pier-setup-end

Waiting on stdin, the keep-alive is only `sh` and `tar` in pid 1's session, and
the sandbox's commands run after the caller has seen the end of the block,
when the keep-alive is `sleep` again (pier.sandbox.processes spares the oldest
of pid 1's session: `sh`, which becomes `sleep`, keeps its pid).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable

import docker
from docker.utils.socket import frames_iter

# $0 names it in `ps`, $1 is where the archive goes (/). tar's messages are kept in a variable (never written to
# stdout while the caller is still sending, which would block both sides); what
# tar leaves unread (it stopped early) is drained so the caller's send ends.
KEEPALIVE_SCRIPT = r"""
drain() { cat >/dev/null 2>&1 || while read -r _; do :; done; }
if command -v tar >/dev/null 2>&1; then
  out=$(tar -x -p -f - -C "$1" 2>&1); status=$?
  drain
else
  drain; out=""; status=notar
fi
printf '\npier-setup %s\n%s\npier-setup-end\n' "$status" "$out"
exec sleep infinity
"""
KEEPALIVE = ["sh", "-c", KEEPALIVE_SCRIPT, "pier-keepalive", "/"]
END = b"\npier-setup-end\n"
NO_TAR = "notar"
SEND_TIMEOUT_S = 120.0  # for one chunk of the archive to be taken
READ_TIMEOUT_S = 300.0  # for the status block, once the archive is sent (tar may still be writing)


class ChannelClosed(RuntimeError):
    """The keep-alive's stdin could not take the archive (the attach failed, or
    the stream ended without the status block): nothing is known to be placed."""


def send_on_stdin(api: docker.APIClient, container_id: str, chunks: Iterable[bytes]) -> tuple[str, str]:
    """Send a tar to the keep-alive's stdin and read its status block: (tar's exit
    code as text, or NO_TAR; tar's messages). Raises ChannelClosed when the
    channel failed before an answer."""
    try:
        sock = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    except (docker.errors.APIError, OSError) as exc:
        raise ChannelClosed(f"could not attach to the keep-alive: {exc}") from exc
    raw = getattr(sock, "_sock", sock)  # the SDK wraps the hijacked socket in a SocketIO
    raw.settimeout(SEND_TIMEOUT_S)  # a container that stopped under the send never reads again
    output = b""
    try:
        try:
            for chunk in chunks:
                raw.sendall(chunk)
            raw.shutdown(socket.SHUT_WR)  # the engine closes the keep-alive's stdin (StdinOnce)
            raw.settimeout(READ_TIMEOUT_S)
            for _stream, data in frames_iter(sock, tty=False):
                output += data
                if END in output:
                    break
        except OSError as exc:
            raise ChannelClosed(f"the keep-alive's stream broke: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    return parse_status(output)


def parse_status(output: bytes) -> tuple[str, str]:
    """(status, messages) from the keep-alive's output; ChannelClosed without its block."""
    text = output.decode(errors="replace")
    _before, marker, rest = text.rpartition("\npier-setup ")
    if not marker or "\npier-setup-end\n" not in rest:
        raise ChannelClosed(f"the keep-alive ended its stream without its status: {text.strip()[-300:]!r}")
    status, _, messages = rest.partition("\n")
    return status.strip(), messages.rsplit("\npier-setup-end\n", 1)[0].strip()
