package postgres_test

import (
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storebench"
)

// BenchmarkSuite is the benchmark every store runs (storebench.Benchmark),
// the source of docs/benchmarks.md. Its pool is pgxpool's default,
// max(4, runtime.NumCPU()) connections, as a pool sized for the server's
// cores should be: more connections than the server can run at once only
// make each call cost it more (BenchmarkPoolSize, docs/postgres.md).
func BenchmarkSuite(b *testing.B) {
	storebench.Benchmark(b, func(b *testing.B) idem.Store { return newStore(b, newPool(b, 0), nil) })
}

// BenchmarkGuard is what idem.Guard's middleware costs a server whose tool
// calls an outside API (storebench.Guard), on this store.
func BenchmarkGuard(b *testing.B) { storebench.Guard(b, newStore(b, newPool(b, 0), nil)) }
