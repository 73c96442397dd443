#!/usr/bin/env bash
# with-dynamodb.sh CMD [ARGS...]
#
# Starts a throw-away DynamoDB Local (in memory) on 127.0.0.1, runs CMD with
# IDEMKIT_DYNAMODB_URL pointing at it (and AWS_REGION=us-east-1 with dummy
# AWS credentials, for CMD only), then stops it, removes its directory and
# exits with CMD's status.
#
#   scripts/with-dynamodb.sh go test ./store/dynamo/
#   scripts/with-postgres.sh scripts/with-pgbouncer.sh scripts/with-dynamodb.sh go test ./...
#
# If IDEMKIT_DYNAMODB_URL is already set (an outer with-dynamodb.sh, or a
# DynamoDB Local you run yourself), CMD runs against it and none is started.
#
# DynamoDB Local is AWS's DynamoDBLocal.jar 1.25.1, as shipped in the npm
# package amplify-dynamodb-simulator@2.9.30 (npm pack fetches it from the npm
# registry into a temporary directory). It runs on Java 17; as root in CI,
# Debian's openjdk-17-jre-headless is installed with apt-get when java is
# missing. DynamoDB Local runs transactions one at a time, so it never
# answers TransactionConflict as DynamoDB does under contention.
#
# Environment:
#   IDEMKIT_DYNAMODB_PORT  first port to try (default 8765); the next free one
#                          is used if it is busy.
#   IDEMKIT_DYNAMODB_PKG   the npm package holding the jar (default
#                          amplify-dynamodb-simulator@2.9.30).
set -euo pipefail

log() { echo "with-dynamodb: $*" >&2; }

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

if [ -n "${IDEMKIT_DYNAMODB_URL:-}" ]; then
  log "IDEMKIT_DYNAMODB_URL already set; using that DynamoDB"
  exec "$@"
fi

if ! command -v java >/dev/null 2>&1; then
  if [ -n "${CI:-}" ] && [ "$(id -u)" -eq 0 ]; then
    log "installing Java 17 (openjdk-17-jre-headless) with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
  else
    log "DynamoDB Local needs java (17 or later); install openjdk-17-jre-headless"
    exit 1
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  log "npm is needed to fetch DynamoDB Local (npm pack ${IDEMKIT_DYNAMODB_PKG:-amplify-dynamodb-simulator@2.9.30})"
  exit 1
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-dynamodb.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$SECONDS
pkg=${IDEMKIT_DYNAMODB_PKG:-amplify-dynamodb-simulator@2.9.30}
(cd "$DIR" && npm pack --silent "$pkg" >pack.out 2>pack.err) || {
  log "npm pack $pkg failed"
  cat "$DIR/pack.err" >&2 || true
  exit 1
}
tgz=$(tail -n1 "$DIR/pack.out")
tar -xzf "$DIR/$tgz" -C "$DIR" package/emulator
rm -f "$DIR/$tgz"
EMU=$DIR/package/emulator
[ -f "$EMU/DynamoDBLocal.jar" ] || { log "$pkg holds no emulator/DynamoDBLocal.jar"; exit 1; }

# busy reports whether something accepts connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# answers reports whether DynamoDB Local on port $1 answers HTTP (any status:
# an unsigned GET gets a 400).
answers() (
  exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
  printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  line=
  read -r -t 2 line <&3 || true
  [[ $line == HTTP/* ]]
) 2>/dev/null

port=${IDEMKIT_DYNAMODB_PORT:-8765}
for _ in $(seq 1 50); do
  if busy "$port"; then
    port=$((port + 1))
    continue
  fi
  # exec, so that $! is java itself.
  (cd "$EMU" && exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
    -inMemory -disableTelemetry -port "$port") >"$DIR/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do # up to 60 s
    answers "$port" && break 2
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  # Lost a race for the port, or a real failure: show the log, try the next.
  tail -n 5 "$DIR/log" >&2 || true
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  port=$((port + 1))
done
if [ -z "$pid" ]; then
  log "could not start DynamoDB Local"
  cat "$DIR/log" >&2 || true
  exit 1
fi
log "DynamoDB Local ($pkg) up on 127.0.0.1:$port after $((SECONDS - t0)) s"

# The region and dummy credentials are set for the command only.
. "$(dirname "$0")/lib/run-command.sh"
run_command "DynamoDB Local" env IDEMKIT_DYNAMODB_URL="http://127.0.0.1:$port" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=dummy AWS_SECRET_ACCESS_KEY=dummy "$@"
