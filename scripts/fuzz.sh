#!/usr/bin/env bash
# fuzz.sh [TIME]: runs every fuzz target for TIME each (default 5s; CI uses
# the default, a longer run on demand: scripts/fuzz.sh 10m). The targets
# cover what a caller controls: a tool call's arguments and _meta, op ids,
# merge inputs, and the tool listings idem audit reads. New inputs that
# widen coverage stay in Go's fuzz cache; a failing input is written to the
# package's testdata/fuzz and fails the run: commit it with the fix, so it
# is run by every go test from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-5s}
targets=(
  "./idem FuzzCall"
  "./idem FuzzOpID"
  "./merge FuzzRulesAreJoins"
  "./cmd/idem FuzzClassify"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz.sh: $name in $pkg for $time" >&2
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg"
done
