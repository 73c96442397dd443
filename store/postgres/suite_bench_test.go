package postgres_test

import (
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storebench"
)

// BenchmarkSuite is the benchmark every store runs (storebench.Benchmark),
// the source of docs/benchmarks.md, here with the protocols a server would
// write by hand in place of the middleware (byHand) timed beside its calls
// on the same pool (storebench.BenchmarkByHand). Its pool is pgxpool's
// default, max(4, runtime.NumCPU()) connections, as a pool sized for the
// server's cores should be: more connections than the server can run at
// once only make each call cost it more (BenchmarkPoolSize,
// docs/stores.md).
func BenchmarkSuite(b *testing.B) {
	storebench.BenchmarkByHand(b, func(b *testing.B) (idem.Store, storebench.ByHand) {
		pool := newPool(b, 0)
		return newStore(b, pool, nil), newByHand(b, pool)
	})
}

// BenchmarkGuard is what idem.Guard's middleware costs a server whose tool
// calls an outside API (storebench.Guard), on this store.
func BenchmarkGuard(b *testing.B) { storebench.Guard(b, newStore(b, newPool(b, 0), nil)) }

// BenchmarkCallsAlone is a first call and a replay each alone
// (storebench.CallsAlone), to profile:
//
//	go test -run '^$' -bench 'CallsAlone/first' -cpuprofile cpu.out -memprofile mem.out ./store/postgres/
func BenchmarkCallsAlone(b *testing.B) {
	storebench.CallsAlone(b, func(b *testing.B) idem.Store { return newStore(b, newPool(b, 0), nil) })
}
