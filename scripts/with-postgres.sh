#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Starts a throw-away PostgreSQL on 127.0.0.1, runs CMD with
# IDEMKIT_POSTGRES_URL pointing at an empty database, then stops the server,
# removes its data directory and exits with CMD's status.
#
#   scripts/with-postgres.sh go test -race ./store/postgres/
#   scripts/with-postgres.sh scripts/with-dynamodb.sh go test ./...
#
# If IDEMKIT_POSTGRES_URL is already set (an outer with-postgres.sh, or a
# server you run yourself), CMD runs against it and no server is started.
#
# Environment:
#   IDEMKIT_POSTGRES_PORT  first port to try (default 55432); the next free
#                          one is used if it is busy.
#   IDEMKIT_POSTGRES_OPTS  more server settings, e.g. "-c shared_buffers=256MB"
#                          (the scale benchmark's buffer-size runs).
#
# Installs PostgreSQL with apt-get when no /usr/lib/postgresql/*/bin exists
# (needs root). As root the server runs as the user postgres.
set -euo pipefail

log() { echo "with-postgres: $*" >&2; }

# runuser and useradd live in sbin, which a minimal PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

if [ -n "${IDEMKIT_POSTGRES_URL:-}" ]; then
  log "IDEMKIT_POSTGRES_URL already set; using that server"
  exec "$@"
fi

# The server's bin directory: the one with initdb (the client package alone
# creates /usr/lib/postgresql/*/bin too).
pgbin() { ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n1 | xargs -r dirname; }
PGBIN=$(pgbin)
if [ -z "$PGBIN" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "PostgreSQL is not installed and installing it needs root"
    exit 1
  fi
  log "installing PostgreSQL with apt-get"
  mkdir -p /etc/postgresql-common/createcluster.d # no default 'main' cluster
  echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/no-main.conf
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  PGBIN=$(pgbin)
  [ -n "$PGBIN" ] || { log "apt-get installed no /usr/lib/postgresql/*/bin"; exit 1; }
fi

# as_pg runs a server binary as the user that owns the data directory: the
# user postgres when we are root (initdb refuses root), else ourselves.
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  as_pg() { (cd / && runuser -u postgres -- "$@"); }
else
  as_pg() { "$@"; }
fi

PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-pg.XXXXXX")
chmod 755 "$PGDIR"
[ "$(id -u)" -eq 0 ] && chown postgres "$PGDIR"

started=
cleanup() {
  if [ -n "$started" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$SECONDS
as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null

# busy reports whether something accepts connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port=${IDEMKIT_POSTGRES_PORT:-55432}
for _ in $(seq 1 50); do
  if busy "$port"; then
    port=$((port + 1))
    continue
  fi
  # Durability settings are off: the data dies with the run anyway.
  if as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='' -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off ${IDEMKIT_POSTGRES_OPTS:-}" \
    start >/dev/null; then
    started=1
    break
  fi
  # Lost a race for the port, or a real failure: show the log, try the next.
  tail -n 5 "$PGDIR/log" >&2 || true
  port=$((port + 1))
done
if [ -z "$started" ]; then
  log "could not start PostgreSQL"
  cat "$PGDIR/log" >&2 || true
  exit 1
fi

"$PGBIN/createdb" -h 127.0.0.1 -p "$port" -U postgres testdb
log "PostgreSQL $("$PGBIN/postgres" -V | awk '{print $3}') up on 127.0.0.1:$port after $((SECONDS - t0)) s"

export IDEMKIT_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/testdb?sslmode=disable"
. "$(dirname "$0")/lib/run-command.sh"
run_command PostgreSQL "$@"
