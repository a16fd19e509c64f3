#!/usr/bin/env bash
# Mutation score of the modules where a silent bug costs most (the list is
# [tool.mutmut] only_mutate in pyproject.toml), against the unit tests.
# Not part of CI: a full run takes tens of minutes on two cores.
#
#   bash scripts/mutation.sh                  # every listed module, one after another
#   bash scripts/mutation.sh pier.redact      # one module (a mutmut name prefix)
#
# Then: `uv run mutmut results` lists the survivors, `uv run mutmut show NAME`
# shows one. Runs one test process at a time (--max-children 1) unless
# MUTATION_JOBS says otherwise: the machine is often shared.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULES=(
  pier.lifecycle.assets pier.redact pier.api.auth pier.server.tokens
  pier.checks.runner pier.checks.program pier.sandbox.sweeper
  pier.storage.local pier.lifecycle.collect pier.vault
)
(($#)) && MODULES=("$@")

# Unit tests only, and no service: a mutation run must not depend on Docker or
# PostgreSQL, nor fail because CI=true turns their absence into failures.
unset CI PIER_TEST_POSTGRES_URL
export PIER_SHARED_DIR="${PIER_SHARED_DIR:-$(cd .. && pwd)/shared}"

for module in "${MODULES[@]}"; do
  echo "== mutmut: $module"
  uv run mutmut run "${module}.*" --max-children "${MUTATION_JOBS:-1}"
done

# Per module: mutants generated, killed, survived (and any other outcome).
uv run mutmut results --all true 2>/dev/null | awk -F': ' '
  / pier\./ { name = $1; sub(/^ +/, "", name); sub(/\.x.*$/, "", name); n[name]++; s[name, $2]++; st[$2] = 1 }
  END { for (m in n) { line = m ": " n[m] " mutants"; for (k in st) if (s[m, k]) line = line ", " s[m, k] " " k; print line } }' | sort
