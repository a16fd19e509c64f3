"""Where a code check's source comes from, and fetching it.

A git URL is cloned inside the sandbox when the run has network, else on the
host. A local path (allowed only where the caller names a folder for them: the
command line, never a server reading its own disk for a caller) is always
fetched on the host: a repository is cloned (honouring `ref`), a plain folder is
copied. Host clones run with no user or system git config and only the
transports named below, so a source cannot use the host's credentials; a
remote source's host is resolved once and judged by the outbound policy
(pier.outbound), git is held to the checked address (curl's resolve list for
http(s), the address itself for git://) and follows no redirect."""

from __future__ import annotations

import base64
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pier.checks.model import Check, CodeCheck, parse_checks
from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused

CHECKS_ROOT = "/app/checks"
_REMOTE = re.compile(r"^(https?|git|ssh)://|^[\w.-]+@[\w.-]+:")
_HOST_PROTOCOLS = ("file", "https", "http", "git")
# Host variables a clone over https may need (proxy, CAs); nothing else is passed.
_HOST_ENV = (
    "PATH", "LANG", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO",
)  # fmt: skip
# Git in a clean shell: the agent may have written ~/.gitconfig or /etc/gitconfig
# (an `insteadOf` could swap the source), so neither is read.
GIT_CLEAN_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0"}


class FetchError(Exception):
    """The source could not be fetched; the message says why."""


def is_remote(source: str) -> bool:
    return bool(_REMOTE.match(source))


def resolve_local(check: CodeCheck, source_dir: Path | None) -> CodeCheck:
    """The check with a local source made absolute and verified to exist.
    Raises InputError when local sources are not allowed or the path is missing."""
    if is_remote(check.source):
        return check
    if source_dir is None:
        raise InputError(
            f"check '{check.name}': source '{check.source}' is a local path, which only runs "
            "started with `pier run` on this machine (not --remote) may use; give a git URL (https://...)"
        )
    raw = check.source.removeprefix("file://")
    path = (source_dir / os.path.expanduser(raw)).resolve()
    if not path.is_dir():
        raise InputError(f"check '{check.name}': source {path} is not a folder or git repository")
    if check.ref and not is_repository(path):
        raise InputError(
            f"check '{check.name}': ref '{check.ref}' needs a git repository, and {path} is not one"
        )
    return check.model_copy(update={"source": str(path)})


def is_repository(path: Path) -> bool:
    """A work tree's top (holds .git) or a bare repository."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def clones_in_sandbox(check: CodeCheck, network: bool) -> bool:
    return network and is_remote(check.source)


def sandbox_clone_command(check: CodeCheck) -> str:
    """Clone the source into /app/checks/<name> inside the sandbox, replacing
    whatever is there."""
    dest = shlex.quote(f"{CHECKS_ROOT}/{check.name}")
    command = f"rm -rf -- {dest} && git clone --quiet -- {shlex.quote(check.source)} {dest}"
    if check.ref:
        command += f" && git -C {dest} checkout --quiet {shlex.quote(check.ref)} --"
    return command


def destination(source: str) -> tuple[str, int] | None:
    """The host and port a remote http(s) or git:// source is fetched from; None
    for a local path (and for ssh, which the host does not fetch)."""
    parts = urlsplit(source)
    default = {"https": 443, "http": 80, "git": 9418}.get(parts.scheme)
    if default is None or not parts.hostname:
        return None
    try:
        return parts.hostname, parts.port or default
    except ValueError:
        raise InputError(f"check source {source!r} has no valid port") from None


def check_destination(check: CodeCheck, policy: OutboundPolicy, network: bool) -> None:
    """At accept: refuse a source the host would fetch from a refused address."""
    where = destination(check.source)
    if where is not None and not clones_in_sandbox(check, network):
        policy.check_name(*where, f"checks.{check.name}.source")


def fetch_on_host(
    check: CodeCheck,
    dest: Path,
    timeout: float,
    policy: OutboundPolicy | None = None,
    secret: str | None = None,
) -> Path:
    """The source as a folder named after the check under dest. Raises FetchError
    (saying so when its host is not an allowed destination). `secret` (a token) is
    sent as HTTP basic auth, in git's environment, never on its command line."""
    target = dest / check.name
    source = Path(check.source)
    if not is_remote(check.source) and not is_repository(source):
        try:
            shutil.copytree(source, target, symlinks=True)
        except OSError as exc:  # gone since prepare, or unreadable: a broken check, not a crash
            raise FetchError(f"copying {source} failed: {exc}") from None
        return target
    if shutil.which("git") is None:
        raise FetchError("git is not installed on the pier host, which fetches this source: install git")
    source_url, pinned = _pinned(check.source, policy or OutboundPolicy())
    auth = auth_env(secret) if secret else {}
    _git([*pinned, "clone", "--quiet", "--", source_url, str(target)], dest, timeout, "clone", auth)
    if check.ref:
        _git(
            ["-C", str(target), "checkout", "--quiet", check.ref, "--"],
            dest,
            timeout,
            f"checkout of {check.ref}",
        )
    return target


def _pinned(source: str, policy: OutboundPolicy) -> tuple[str, list[str]]:
    """The URL to clone and the git options that hold it to the address the policy
    checked: resolved once here, so a name that re-resolves elsewhere changes nothing."""
    where = destination(source)
    if where is None:
        return source, []
    host, port = where
    try:
        address = policy.resolve(host, port, "source")[0]
    except OutboundRefused as exc:
        raise FetchError(str(exc)) from None
    except OSError as exc:
        raise FetchError(f"{host} does not resolve ({exc})") from None
    if urlsplit(source).scheme == "git":  # no TLS name to keep: connect to the address itself
        parts = urlsplit(source)
        shown = f"[{address}]" if ":" in address else address
        return parts._replace(netloc=f"{shown}:{port}").geturl(), []
    pinned = f"[{address}]" if ":" in address else address
    return source, ["-c", f"http.curloptResolve={host}:{port}:{pinned}", "-c", "http.followRedirects=false"]


_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")


def probe(url: str, ref: str | None, secret: str | None, policy: OutboundPolicy, timeout: float) -> None:
    """That `url` answers to git with the token given and has `ref` (a branch or
    tag; a commit id is only checked when cloned). Raises FetchError saying which."""
    if shutil.which("git") is None:
        raise FetchError("git is not installed on the pier host, which fetches check sources: install git")
    source_url, pinned = _pinned(url, policy)
    refs = [] if ref is None or _SHA.match(ref) else [ref]
    auth = auth_env(secret) if secret else {}
    with tempfile.TemporaryDirectory(prefix="pier-probe-") as home:
        try:
            _git(
                [*pinned, "ls-remote", "--exit-code", "--", source_url, *refs],
                Path(home),
                timeout,
                "ls-remote",
                auth,
            )
        except FetchError as exc:
            if refs and str(exc).rstrip().endswith("failed:"):  # exit 2, nothing said: no such ref
                raise FetchError(f"{url} has no branch or tag '{ref}'") from None
            raise


def auth_env(secret: str) -> dict[str, str]:
    """git's configuration, by environment, that sends `secret` as a token
    (x-access-token, the user name GitHub and most forges take for one)."""
    token = base64.b64encode(f"x-access-token:{secret}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {token}",
    }


def _git(args: list[str], home: Path, timeout: float, what: str, extra: dict[str, str] | None = None) -> None:
    protocols = ["-c", "protocol.allow=never"]
    for name in _HOST_PROTOCOLS:
        protocols += ["-c", f"protocol.{name}.allow=always"]
    env = {key: os.environ[key] for key in _HOST_ENV if key in os.environ}
    env.update(GIT_CLEAN_ENV, HOME=str(home))
    env.update(extra or {})
    try:
        done = subprocess.run(
            ["git", *protocols, *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise FetchError(f"git {what} did not finish within {timeout:g} seconds") from None
    if done.returncode != 0:
        raise FetchError(f"git {what} failed: {done.stderr.strip()[-2000:]}")


def required_tools(checks: Sequence[Check], network: bool) -> dict[str, str]:
    """The tools the image must have for these checks, each with what needs it."""
    tools: dict[str, str] = {}
    builtin = [check.name for check in checks if check.builtin and check.runs_here]
    if builtin:
        tools["python3"] = f"the built-in checks ({', '.join(builtin)}) run on"
    commands = [c.name for c in checks if c.type == "command" and c.runs_here]
    if commands:
        tools["bash"] = f"the command checks ({', '.join(commands)}) run in"
    cloned = [c.name for c in checks if isinstance(c, CodeCheck) and clones_in_sandbox(c, network)]
    if cloned:
        tools["git"] = f"the code checks ({', '.join(cloned)}) clone their sources with"
    return tools


def load_checks(raw: Any, source_dir: Path | None) -> tuple[Check, ...]:
    """The run's checks validated, with local sources resolved. Raises InputError."""
    checks = parse_checks(raw)
    return tuple(resolve_local(c, source_dir) if isinstance(c, CodeCheck) else c for c in checks)
