package postgres_test

import (
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storebench"
)

// BenchmarkSuite is the benchmark every store runs (storebench.Benchmark),
// the source of docs/benchmarks.md.
func BenchmarkSuite(b *testing.B) {
	storebench.Benchmark(b, func(b *testing.B) idem.Store { return newStore(b, newPool(b, 32), nil) })
}
