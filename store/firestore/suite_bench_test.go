package firestore_test

import (
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/storetest"
)

// BenchmarkSuite is the benchmark every store runs (storetest.Benchmark),
// the source of docs/benchmarks.md.
func BenchmarkSuite(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) idem.Store { return newStore(b, nil) })
}
