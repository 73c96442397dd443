#!/usr/bin/env bash
# with-pgbouncer.sh CMD [ARGS...]
#
# Starts a throw-away PgBouncer on 127.0.0.1 in transaction pooling in front
# of the PostgreSQL of IDEMKIT_POSTGRES_URL, runs CMD with
# IDEMKIT_PGBOUNCER_URL pointing at the same database through it, then stops
# PgBouncer, removes its directory and exits with CMD's status. Run it inside
# with-postgres.sh:
#
#   scripts/with-postgres.sh scripts/with-pgbouncer.sh go test ./store/postgres/
#
# If IDEMKIT_PGBOUNCER_URL is already set (an outer with-pgbouncer.sh, or a
# PgBouncer you run yourself), CMD runs against it and none is started.
#
# PgBouncer is set up as production ones commonly are: pool_mode =
# transaction, default_pool_size = 4 server connections, up to 200 clients,
# and the startup parameters pgx sends that PgBouncer does not track
# (extra_float_digits, options) ignored.
#
# Environment:
#   IDEMKIT_PGBOUNCER_PORT  first port to try (default 56432); the next free
#                           one is used if it is busy.
#
# Installs the Debian package pgbouncer with apt-get when no pgbouncer binary
# is found (needs root), without letting the package start its own service.
# PgBouncer refuses to run as root: as root it runs as the user postgres.
set -euo pipefail

log() { echo "with-pgbouncer: $*" >&2; }

# runuser and useradd live in sbin, which a minimal PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

if [ -n "${IDEMKIT_PGBOUNCER_URL:-}" ]; then
  log "IDEMKIT_PGBOUNCER_URL already set; using that PgBouncer"
  exec "$@"
fi
if [ -z "${IDEMKIT_POSTGRES_URL:-}" ]; then
  log "IDEMKIT_POSTGRES_URL is not set: run me inside scripts/with-postgres.sh"
  exit 2
fi

# The server PgBouncer connects to, from a URL of the shape with-postgres.sh
# exports: postgres://user[:password]@host[:port]/dbname[?params].
re='^postgres(ql)?://([^:@/]+)(:([^@/]*))?@([^:/?]+)(:([0-9]+))?/([^?]+)'
if ! [[ $IDEMKIT_POSTGRES_URL =~ $re ]]; then
  log "cannot read user, host, port and database from IDEMKIT_POSTGRES_URL"
  exit 2
fi
db_user=${BASH_REMATCH[2]}
db_password=${BASH_REMATCH[4]}
db_host=${BASH_REMATCH[5]}
db_port=${BASH_REMATCH[7]:-5432}
db_name=${BASH_REMATCH[8]}

pgbouncer_bin() { command -v pgbouncer 2>/dev/null || ls /usr/sbin/pgbouncer 2>/dev/null || true; }
PGBOUNCER=$(pgbouncer_bin)
if [ -z "$PGBOUNCER" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "PgBouncer is not installed and installing it needs root"
    exit 1
  fi
  log "installing PgBouncer with apt-get"
  # The package would start a system-wide pgbouncer; a policy-rc.d that
  # refuses every start keeps it from doing so (Docker images ship one).
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get update -qq
  status=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null || status=$?
  [ -n "$own_policy" ] && rm -f /usr/sbin/policy-rc.d
  [ "$status" -eq 0 ] || { log "apt-get install pgbouncer failed ($status)"; exit 1; }
  # Should a service have started anyway, stop it and keep it off.
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now pgbouncer >/dev/null 2>&1 || true
  elif [ -x /etc/init.d/pgbouncer ]; then
    /etc/init.d/pgbouncer stop >/dev/null 2>&1 || true
    update-rc.d pgbouncer disable >/dev/null 2>&1 || true
  fi
  PGBOUNCER=$(pgbouncer_bin)
  [ -n "$PGBOUNCER" ] || { log "apt-get installed no pgbouncer binary"; exit 1; }
fi

# as_bouncer runs a command as the user PgBouncer runs as: postgres when we
# are root (PgBouncer refuses root), else ourselves.
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  as_bouncer() { (cd / && runuser -u postgres -- "$@"); }
else
  as_bouncer() { "$@"; }
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-pgbouncer.XXXXXX")
chmod 755 "$DIR"
[ "$(id -u)" -eq 0 ] && chown postgres "$DIR"

started=
cleanup() {
  if [ -n "$started" ] && [ -s "$DIR/pid" ]; then
    pid=$(cat "$DIR/pid")
    # SIGINT: PgBouncer's safe shutdown, once clients are gone (they are).
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# busy reports whether something accepts connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The test server trusts every local connection, so PgBouncer does too;
# auth_file names the user it logs in as.
printf '"%s" "%s"\n' "$db_user" "$db_password" >"$DIR/users.txt"
target="host=$db_host port=$db_port dbname=$db_name user=$db_user"
[ -n "$db_password" ] && target="$target password=$db_password"

# write_config writes the configuration for listening on port $1.
write_config() {
  cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
testdb = $target

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $1
unix_socket_dir =
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = transaction
default_pool_size = 4
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
; pgx sends these in its startup packet; PgBouncer does not track them.
ignore_startup_parameters = extra_float_digits,options
; Transaction pooling hands a server connection back at each transaction's
; end with nothing to reset: DISCARD ALL would only run in session pooling.
server_reset_query =
logfile = $DIR/log
pidfile = $DIR/pid
log_connections = 0
log_disconnections = 0
EOF
  [ "$(id -u)" -eq 0 ] && chown postgres "$DIR/pgbouncer.ini" "$DIR/users.txt"
  return 0
}

# accepts reports whether a query through PgBouncer on port $1 is answered.
PSQL=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n1)
PSQL=${PSQL:-psql}
accepts() {
  [ "$("$PSQL" "postgres://$db_user@127.0.0.1:$1/testdb?sslmode=disable&connect_timeout=2" -XAtqc 'SELECT 1' 2>/dev/null)" = 1 ]
}

t0=$SECONDS
port=${IDEMKIT_PGBOUNCER_PORT:-56432}
for _ in $(seq 1 50); do
  if busy "$port"; then
    port=$((port + 1))
    continue
  fi
  write_config "$port"
  if as_bouncer "$PGBOUNCER" -d -q "$DIR/pgbouncer.ini"; then
    started=1
    for _ in $(seq 1 100); do
      accepts "$port" && break 2
      sleep 0.1
    done
  fi
  # Lost a race for the port, or a real failure: show the log, try the next.
  tail -n 5 "$DIR/log" >&2 || true
  [ -s "$DIR/pid" ] && kill -KILL "$(cat "$DIR/pid")" 2>/dev/null || true
  rm -f "$DIR/pid"
  started=
  port=$((port + 1))
done
if [ -z "$started" ]; then
  log "could not start PgBouncer"
  cat "$DIR/log" >&2 || true
  exit 1
fi
log "PgBouncer $("$PGBOUNCER" --version 2>/dev/null | awk 'NR==1{print $2}') up on 127.0.0.1:$port (transaction pooling, 4 server connections) after $((SECONDS - t0)) s"

export IDEMKIT_PGBOUNCER_URL="postgres://$db_user@127.0.0.1:$port/testdb?sslmode=disable"
. "$(dirname "$0")/lib/run-command.sh"
run_command PgBouncer "$@"
