#!/usr/bin/env bash
# test.sh: the whole test suite, against real services started here.
#
# Checks formatting and go vet, then runs go test -race ./... with a
# throw-away PostgreSQL on loopback (scripts/with-postgres.sh installs it
# with apt-get if the machine lacks it). The race detector needs cgo, so a C
# compiler is installed too if missing. Extra arguments are go test flags,
# e.g.
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
go vet ./...
exec scripts/with-postgres.sh go test -race -count=1 -timeout 45m "$@" ./...
