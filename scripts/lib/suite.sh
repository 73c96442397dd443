#!/usr/bin/env bash
# suite.sh [GO TEST FLAGS]: what scripts/test.sh runs once the services are
# up: go test -race over every package of every module of the workspace
# (go.work), and the example servers' store test again under -tags allstores;
# then, for a full run (no flags), the fuzz targets for a few
# seconds each (scripts/fuzz.sh) and the mutation check (internal/mutation:
# every condition the guarantees rest on, removed one at a time, must fail a
# test).
set -euo pipefail
cd "$(dirname "$0")/../.."
go test -race -count=1 -timeout 45m "$@" github.com/idemkit/sdk/...
# The example servers open PostgreSQL, DynamoDB and Firestore when built with
# -tags allstores (examples/internal/exserve/store.go), on the services above.
go test -race -count=1 -timeout 10m -tags allstores -run '^TestStoreKinds$' "$@" github.com/idemkit/sdk/examples/internal/exserve
if [ $# -eq 0 ]; then
  scripts/fuzz.sh
  go run ./internal/mutation
fi
