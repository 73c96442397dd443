// Package storetest is the conformance suite every [idem.Store] runs: the
// document contract, the middleware, merge rules and side-effect markers, the
// same subtests on every backend. A backend's test file is a harness and one
// call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T, now func() time.Time) idem.Store {
//				return memory.New(&memory.Options{Now: now})
//			},
//			MaxDocumentBytes: 1 << 20,
//		})
//	}
package storetest

import (
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
)

// Harness tells the suite how to make stores of one backend.
type Harness struct {
	// New returns a new, empty store whose clock (for expiry) is now. The
	// suite calls it once per subtest and may run subtests in parallel. The
	// harness cleans up with t.Cleanup.
	New func(t *testing.T, now func() time.Time) idem.Store

	// MaxDocumentBytes is the largest JSON document the store accepts; the
	// suite checks that one byte more fails with idem.ErrTooLarge.
	MaxDocumentBytes int

	// Serialized is true for stores that run write transactions one at a
	// time (SQLite's BEGIN IMMEDIATE): they never make fn lose a race, so the
	// subtest that forces a retry of fn checks only the outcome.
	Serialized bool

	// Concurrency, when positive, caps how many goroutines the cases that
	// contend on one document start (by default 16 to 64). For stores whose
	// test server is slow under heavy contention on one document; what
	// the cases assert does not change.
	Concurrency int

	// MaxTransactionItems, when not zero, is the most documents one
	// transaction may read and write together (DynamoDB's TransactWriteItems
	// holds 100 items). Subtests that batch many writes into one
	// transaction keep their batches well under it.
	MaxTransactionItems int
}

// goroutines returns n, capped at h.Concurrency when that is set.
func (h Harness) goroutines(n int) int {
	if h.Concurrency > 0 && h.Concurrency < n {
		return h.Concurrency
	}
	return n
}

// Run runs the whole suite against the backend h describes.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	t.Run("Reader", func(t *testing.T) { runReader(t, h) })
	t.Run("Consistency", func(t *testing.T) { runConsistency(t, h) })
	t.Run("Middleware", func(t *testing.T) { runMiddleware(t, h) })
	t.Run("Merge", func(t *testing.T) { runMerge(t, h) })
	t.Run("SideEffect", func(t *testing.T) { runSideEffect(t, h) })
}
