"""Installing an agent CLI in the sandbox: the pinned version already on
PATH is used as it is; any other version is replaced by the pinned one; an
npm-based CLI gets Node first when the image has none or one too old. One shell
script, one exec, bounded by the install time limit."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from pier.agents.node import node_install_script, uv_install_script
from pier.agents.pins import Pin
from pier.errors import StageError
from pier.sandbox.base import LineSink, Sandbox

TAIL_LINES = 15
VENV_ROOT = "/opt/pier-agents"  # Python-based CLIs get a venv each here


@dataclass(frozen=True)
class InstallSpec:
    agent: str
    pin: Pin
    binary: str  # the command the CLI puts on PATH
    npm_flags: tuple[str, ...] = ()  # e.g. --allow-scripts for a CLI whose postinstall matters
    pip_extras: tuple[str, ...] = ()


def install_script(spec: InstallSpec) -> str:
    steps = [_preamble(spec), _use_if_present(spec)]
    if spec.pin.registry == "npm":
        steps += [_node_step(spec.pin.node_major), _npm_step(spec)]
    else:
        steps.append(_venv_step(spec))
    steps.append(_verify(spec))
    return "\n".join(steps) + "\n"


def _version_pattern(version: str) -> str:
    # The pinned version as a whole token: 2.1.33 must not match 2.1.332.
    return f"(^|[^0-9.]){re.escape(version)}([^0-9.]|$)"


def _preamble(spec: InstallSpec) -> str:
    return "\n".join(
        [
            "set -uo pipefail",
            "export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false",
            "export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore",
            f"want={shlex.quote(spec.pin.version)}",
            f"have() {{ timeout 120 {shlex.quote(spec.binary)} --version 2>/dev/null | head -3; }}",
            f"at_pin() {{ have | grep -Eq {shlex.quote(_version_pattern(spec.pin.version))}; }}",
        ]
    )


def _use_if_present(spec: InstallSpec) -> str:
    name = shlex.quote(spec.agent)
    return f"""\
if at_pin; then echo "pier: {name} $want is in the image; using it"; exit 0; fi
found=$(have | head -1)
if [ -n "$found" ]; then echo "pier: {name} in the image is '$found'; installing the pinned $want"
else echo "pier: installing {name} $want"; fi"""


def _node_step(major: int) -> str:
    return f"""\
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt {major} ] || ! command -v npm >/dev/null; then
  echo "pier: Node >= {major} with npm is missing (found major $node_major); installing Node from the npm registry"
  {node_install_script()} \\
    || {{ echo "pier: the Node install failed"; exit 1; }}
  hash -r
fi"""


def _npm_step(spec: InstallSpec) -> str:
    flags = " ".join(["--no-fund", "--no-audit", "--loglevel=error", *spec.npm_flags])
    return f"""\
npm install -g {flags} {shlex.quote(spec.pin.spec)} 2>&1 || {{ echo "pier: npm install failed"; exit 1; }}
hash -r"""


def _venv_step(spec: InstallSpec) -> str:
    """A venv made by uv, which needs no ensurepip (Debian's and Ubuntu's stock
    python3 has none without python3-venv): uv from the image, else uv's pinned
    wheel from PyPI; only when that cannot be had, python3's own venv, with the
    distribution's venv package installed when ensurepip is missing. python3
    itself comes from apt when the image has none. Each failure names what is
    missing."""
    venv = f"{VENV_ROOT}/{spec.agent}"
    extras = f"[{','.join(spec.pip_extras)}]" if spec.pip_extras else ""
    requirement = shlex.quote(f"{spec.pin.package}{extras}=={spec.pin.version}")
    agent = spec.agent
    return f"""\
if ! command -v python3 >/dev/null; then
  command -v apt-get >/dev/null \\
    || {{ echo "pier: {agent} needs python3 (3.11 to 3.13); the image has none and no apt-get to install it: use an image with python3"; exit 1; }}
  echo "pier: the image has no python3; installing it with apt-get"
  {{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3; }} >/dev/null 2>&1 \\
    || {{ echo "pier: {agent} needs python3 and 'apt-get install python3' failed (no network to the distribution's mirror?)"; exit 1; }}
  hash -r
fi
python3 -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' \\
  || {{ echo "pier: {agent} needs Python 3.11 to 3.13 as python3; found $(python3 --version 2>&1)"; exit 1; }}
if ! command -v uv >/dev/null; then
  echo "pier: no uv in the image; fetching uv's pinned wheel from PyPI (a venv without ensurepip)"
  {uv_install_script()} \\
    || echo "pier: fetching uv failed; trying python3's own venv"
  hash -r
fi
rm -rf {venv}
if command -v uv >/dev/null; then
  uv venv -q --python "$(command -v python3)" {venv} && uv pip install -q --python {venv}/bin/python {requirement}
else
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    if command -v apt-get >/dev/null; then
      echo "pier: python3 has no ensurepip; installing the distribution's venv package"
      minor=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
      {{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "python$minor-venv"; }} >/dev/null 2>&1 \\
        || {{ echo "pier: {agent} needs uv or python3's venv: uv could not be fetched from PyPI and 'apt-get install python$minor-venv' failed (no network?)"; exit 1; }}
    else
      echo "pier: {agent} needs uv or python3's venv: uv could not be fetched from PyPI, python3 has no ensurepip and the image no apt-get"; exit 1
    fi
  fi
  python3 -m venv {venv} && {venv}/bin/pip install -q --no-cache-dir {requirement}
fi || {{ echo "pier: installing {requirement} failed"; exit 1; }}
ln -sf {venv}/bin/{shlex.quote(spec.binary)} /usr/local/bin/{shlex.quote(spec.binary)}
hash -r"""


def _verify(spec: InstallSpec) -> str:
    return f"""\
if ! at_pin; then echo "pier: after the install, '{spec.binary} --version' says '$(have | head -1)', not $want"; exit 1; fi
echo "pier: {spec.agent} $want installed\""""


def run_install(sandbox: Sandbox, spec: InstallSpec, log: LineSink, timeout: float) -> None:
    """Install (or confirm) spec's CLI. Raises StageError naming the agent, the
    version and the installer's last lines."""
    tail: list[str] = []

    def on_line(line: str) -> None:
        tail.append(line)
        del tail[:-TAIL_LINES]
        log(line)

    result = sandbox.exec(["bash", "-c", install_script(spec)], workdir="/", timeout=timeout, on_line=on_line)
    if result.ok:
        return
    last = "\n".join(tail) or "(no output)"
    what = f"{spec.agent} {spec.pin.version} ({spec.pin.spec} from {spec.pin.registry})"
    if result.timed_out:
        raise StageError(
            "setup", f"installing {what} took over {timeout:.0f}s and was stopped; last lines:\n{last}"
        )
    raise StageError(
        "setup",
        f"installing {what} failed (exit {result.exit_code}); the installer's last lines:\n{last}\n"
        "Check that the sandbox reaches the package registry (network_enabled) or use an image "
        "that has the CLI at this version.",
    )
