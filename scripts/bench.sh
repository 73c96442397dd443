#!/usr/bin/env bash
# bench.sh: runs every store's BenchmarkSuite (internal/storebench.Benchmark;
# PostgreSQL's with the same work written by hand beside it, BenchmarkByHand),
# the guard's BenchmarkGuard on memory, SQLite and PostgreSQL,
# DynamoDB's BenchmarkFirstCall, idem/mcpgo's BenchmarkCompare and the
# examples' BenchmarkFlood (on SQLite and PostgreSQL) against the
# services the test scripts start, then rewrites docs/benchmarks.md and
# docs/benchmarks/*.svg from the output (internal/benchreport). The raw output is kept in docs/benchmarks/raw.txt.
# It takes about 11 minutes on 2 cores; the emulators run fewer iterations,
# as their calls are slow, and so do the floods without limits.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--inside" ]; then
  exec scripts/with-postgres.sh scripts/with-dynamodb.sh scripts/with-firestore.sh "$0" --inside
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bench() { go test -run '^$' -count 1 "$@" | tee -a "$out"; }
bench -bench 'Suite|Guard' -benchtime 2s ./store/memory ./store/sqlite ./store/postgres
bench -bench 'Suite|FirstCall' -benchtime 300x ./store/dynamo
bench -bench Suite -benchtime 20x ./store/firestore
# The go-sdk and mcp-go adapters side by side, three rounds (docs/benchmarks.md, "mcp-go").
bench -bench Compare -benchtime 3s -count 3 ./idem/mcpgo
# One user's flood against another's calls, over HTTP to the examples' server
# (a module of its own), with the default limits and without: a call under a
# flood of large bodies without limits takes seconds, so those rows run fewer.
(
  cd examples
  bench -tags postgres -bench '^BenchmarkFlood$/^store=/./^limits=default$' -benchtime 200x ./internal/exserve
  bench -tags postgres -bench '^BenchmarkFlood$/^store=/./^limits=off$' -benchtime 20x ./internal/exserve
)
mkdir -p docs/benchmarks
cp "$out" docs/benchmarks/raw.txt
go run ./internal/benchreport -o docs < "$out"
echo "bench.sh: wrote docs/benchmarks.md" >&2
