#!/usr/bin/env bash
# mutation-check.sh [FLAGS]: shows that the test suite fails when any
# condition the guarantees rest on is removed (see docs/mutation.md).
#
# Runs go run ./internal/mutation under the scripts that start PostgreSQL,
# DynamoDB Local and the Firestore emulator (each reuses a service whose
# variable is already set, as inside scripts/test.sh's chain). Extra
# arguments are the command's flags, e.g.
#   scripts/mutation-check.sh -run sideeffect
#   scripts/mutation-check.sh -list
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/with-postgres.sh scripts/with-dynamodb.sh scripts/with-firestore.sh \
  go run ./internal/mutation "$@"
