#!/usr/bin/env bash
# Starts a local PostgreSQL for pier's store tests, idempotently: installs the
# Debian server when missing, starts its cluster, creates role and database.
# Prints the URL to export as PIER_TEST_POSTGRES_URL once a client can log in
# with it; exits non-zero, saying why, when the server does not come up.
# Needs root (apt, su).
set -euo pipefail

fail() {
  echo "start-postgres: $*" >&2
  exit 1
}

ROLE="${PIER_PG_ROLE:-pier}"
PASSWORD="${PIER_PG_PASSWORD:-pier}"
DB="${PIER_PG_DB:-pier_test}"
PORT="${PIER_PG_PORT:-5432}"

server_version() {
  # pg_ctlcluster alone comes with postgresql-common (the client); the server
  # binary is what tells us a cluster can run.
  local bin
  bin="$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -1 || true)"
  [[ -n "$bin" ]] && basename "$(dirname "$(dirname "$bin")")"
}

if [[ -z "$(server_version)" ]]; then
  echo "installing postgresql (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y postgresql >/tmp/pier-postgres-install.log 2>&1 || {
    apt-get update >/dev/null 2>&1 && apt-get install -y postgresql >/tmp/pier-postgres-install.log 2>&1
  } || { tail -20 /tmp/pier-postgres-install.log >&2; exit 1; }
fi
VERSION="$(server_version)" || fail "no PostgreSQL server binary after installing postgresql"

if ! pg_lsclusters -h | awk '{print $1, $2}' | grep -qx "$VERSION main"; then
  pg_createcluster "$VERSION" main -p "$PORT" >&2
fi
if ! pg_lsclusters -h | awk -v v="$VERSION" '$1 == v && $2 == "main" {print $4}' | grep -qx online; then
  pg_ctlcluster "$VERSION" main start
fi

psql_admin() { runuser -u postgres -- psql -v ON_ERROR_STOP=1 -p "$PORT" -qtA "$@"; }

up=""
for _ in $(seq 1 30); do
  psql_admin -c 'select 1' >/dev/null 2>&1 && { up=1; break; }
  sleep 1
done
[[ -n "$up" ]] || fail "the $VERSION/main cluster does not answer on port $PORT after 30 s (pg_lsclusters; its log is in /var/log/postgresql/)"

if [[ "$(psql_admin -c "select 1 from pg_roles where rolname = '$ROLE'")" != "1" ]]; then
  psql_admin -c "create role $ROLE login password '$PASSWORD' createdb" >/dev/null
fi
if [[ "$(psql_admin -c "select 1 from pg_database where datname = '$DB'")" != "1" ]]; then
  psql_admin -c "create database $DB owner $ROLE" >/dev/null
fi

# The tests connect over TCP with a password: prove that works before saying so.
PGPASSWORD="$PASSWORD" psql -h 127.0.0.1 -p "$PORT" -U "$ROLE" -d "$DB" -qtAc 'select 1' >/dev/null \
  || fail "role $ROLE cannot log in to $DB on 127.0.0.1:$PORT"
echo "export PIER_TEST_POSTGRES_URL=postgresql+psycopg://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DB"
