package memory_test

import (
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/memory"
)

// BenchmarkSuite is the benchmark every store runs (storebench.Benchmark),
// the source of docs/benchmarks.md.
func BenchmarkSuite(b *testing.B) {
	storebench.Benchmark(b, func(b *testing.B) idem.Store { return memory.New(nil) })
}

// BenchmarkGuard is what idem.Guard's middleware costs a server whose tool
// calls an outside API (storebench.Guard), on this store.
func BenchmarkGuard(b *testing.B) { storebench.Guard(b, memory.New(nil)) }
