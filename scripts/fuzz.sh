#!/usr/bin/env bash
# fuzz.sh [BUDGET]: runs every fuzz target for BUDGET each, a count of
# executions (default 10000x, 2-7 s a target on 2 cores; CI uses the
# default) or, on demand, a duration (scripts/fuzz.sh 10m). CI counts
# executions because Go 1.26's fuzz coordinator can report a duration's
# end as a failure ("context deadline exceeded", no failing input) when a
# worker is still mid-call at the deadline (go.dev/issue/75804, fixed in
# Go 1.27); a count has no deadline to race. After a duration run, that
# bare message with no input written is that race, not a finding. The targets
# cover what a caller controls: a tool call's arguments and _meta, op ids,
# merge inputs, and the tool listings idem audit reads. New inputs that
# widen coverage stay in Go's fuzz cache; with SAVE=1 they are copied into
# each package's testdata/fuzz (the committed corpora, run as seeds by every
# go test). A failing input is written there too and fails the run: commit
# it with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-10000x}
targets=(
  "./idem FuzzCall"
  "./idem FuzzToolCall"
  "./idem FuzzValidateOpID"
  "./internal/argsfp FuzzOf"
  "./internal/argsfp FuzzOfFlat"
  "./idem FuzzFastCheck"
  "./internal/oprecord FuzzRecordUnmarshalJSON"
  "./merge FuzzRulesAreJoins"
  "./cmd/idem FuzzClassify"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz.sh: $name in $pkg for $budget" >&2
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" "$pkg"
  if [ "${SAVE:-}" = 1 ]; then
    cache="$(go env GOCACHE)/fuzz/github.com/idemkit/sdk/${pkg#./}/$name"
    mkdir -p "$pkg/testdata/fuzz/$name"
    [ -d "$cache" ] && cp -n "$cache"/* "$pkg/testdata/fuzz/$name/" || true
  fi
done
