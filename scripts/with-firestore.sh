#!/usr/bin/env bash
# with-firestore.sh CMD [ARGS...]
#
# Starts Google's Cloud Firestore emulator on 127.0.0.1, runs CMD with
# IDEMKIT_FIRESTORE_EMULATOR_HOST (and FIRESTORE_EMULATOR_HOST, which the Go
# client reads) set to its host:port, then stops the emulator and exits with
# CMD's status. Its data lives in memory and dies with it; tests clear it
# with the emulator's DELETE endpoint.
#
#   scripts/with-firestore.sh go test ./store/firestore/
#
# If IDEMKIT_FIRESTORE_EMULATOR_HOST is already set (an outer
# with-firestore.sh, or an emulator you run yourself), CMD runs against it
# and none is started.
#
# Environment:
#   IDEMKIT_FIRESTORE_PORT  first port to try (default 8282); the next free
#                           one is used if it is busy.
#   IDEMKIT_FIRESTORE_JAR   the emulator's jar (default the one the Debian
#                           package google-cloud-cli-firestore-emulator
#                           installs).
#
# Needs java (17 or later). java is started directly: the gcloud wrapper
# forks it, and stopping the wrapper would leave the emulator running.
set -euo pipefail

log() { echo "with-firestore: $*" >&2; }

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

if [ -n "${IDEMKIT_FIRESTORE_EMULATOR_HOST:-}" ]; then
  log "IDEMKIT_FIRESTORE_EMULATOR_HOST already set; using that emulator"
  export FIRESTORE_EMULATOR_HOST="$IDEMKIT_FIRESTORE_EMULATOR_HOST"
  exec "$@"
fi

JAR=${IDEMKIT_FIRESTORE_JAR:-/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar}
if [ ! -f "$JAR" ]; then
  log "no emulator jar at $JAR (Debian package google-cloud-cli-firestore-emulator)"
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  log "java is not installed; the emulator needs Java 17 or later"
  exit 1
fi

FSDIR=$(mktemp -d "${TMPDIR:-/tmp}/idemkit-fs.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$FSDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# busy reports whether something accepts connections on 127.0.0.1:$1.
busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

t0=$SECONDS
port=${IDEMKIT_FIRESTORE_PORT:-8282}
for _ in $(seq 1 20); do
  if busy "$port"; then
    port=$((port + 1))
    continue
  fi
  java -Duser.language=en -cp "$JAR" com.google.cloud.datastore.emulator.firestore.CloudFirestore \
    --host=127.0.0.1 --port="$port" >"$FSDIR/log" 2>&1 &
  pid=$!
  # Ready in one to a few seconds; it answers "Ok" on /.
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1; then
      break 2
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  # Lost a race for the port, or a real failure: show the log, try the next.
  tail -n 5 "$FSDIR/log" >&2 || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  port=$((port + 1))
done
if [ -z "$pid" ]; then
  log "could not start the Firestore emulator"
  cat "$FSDIR/log" >&2 || true
  exit 1
fi
log "Firestore emulator up on 127.0.0.1:$port after $((SECONDS - t0)) s"

export IDEMKIT_FIRESTORE_EMULATOR_HOST="127.0.0.1:$port"
export FIRESTORE_EMULATOR_HOST="$IDEMKIT_FIRESTORE_EMULATOR_HOST"
. "$(dirname "$0")/lib/run-command.sh"
run_command "the Firestore emulator" "$@"
