package sqlite_test

import (
	"testing"

	"path/filepath"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storebench"
)

// BenchmarkSuite is the benchmark every store runs (storebench.Benchmark),
// the source of docs/benchmarks.md.
func BenchmarkSuite(b *testing.B) {
	storebench.Benchmark(b, func(b *testing.B) idem.Store { return open(b, filepath.Join(b.TempDir(), "bench.db"), nil) })
}

// BenchmarkGuard is what idem.Guard's middleware costs a server whose tool
// calls an outside API (storebench.Guard), on this store.
func BenchmarkGuard(b *testing.B) {
	storebench.Guard(b, open(b, filepath.Join(b.TempDir(), "guard.db"), nil))
}
