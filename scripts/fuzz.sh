#!/usr/bin/env bash
# fuzz.sh [TIME]: runs every fuzz target for TIME each (default 3s; CI uses
# the default, a longer run on demand: scripts/fuzz.sh 10m). The targets
# cover what a caller controls: a tool call's arguments and _meta, op ids,
# merge inputs, and the tool listings idem audit reads. New inputs that
# widen coverage stay in Go's fuzz cache; with SAVE=1 they are copied into
# each package's testdata/fuzz (the committed corpora, run as seeds by every
# go test). A failing input is written there too and fails the run: commit
# it with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-3s}
targets=(
  "./idem FuzzCall"
  "./idem FuzzToolCall"
  "./idem FuzzValidateOpID"
  "./idem FuzzParseArgs"
  "./idem FuzzFingerprint"
  "./idem FuzzFingerprintFastPath"
  "./idem FuzzCanonical"
  "./idem FuzzFastCheck"
  "./internal/oprecord FuzzAppendJSON"
  "./merge FuzzRulesAreJoins"
  "./cmd/idem FuzzClassify"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz.sh: $name in $pkg for $time" >&2
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg"
  if [ "${SAVE:-}" = 1 ]; then
    cache="$(go env GOCACHE)/fuzz/github.com/idemkit/sdk/${pkg#./}/$name"
    mkdir -p "$pkg/testdata/fuzz/$name"
    [ -d "$cache" ] && cp -n "$cache"/* "$pkg/testdata/fuzz/$name/" || true
  fi
done
