#!/usr/bin/env bash
# test.sh: the whole test suite, against real services started here.
#
# Checks formatting and go vet, then runs go test -race ./... with a
# throw-away PostgreSQL on loopback (scripts/with-postgres.sh installs it
# with apt-get if the machine lacks it). Extra arguments go to go test, e.g.
#   scripts/test.sh -run Conformance
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
exec scripts/with-postgres.sh go test -race -count=1 -timeout 45m "$@" ./...
