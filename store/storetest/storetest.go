// Package storetest is the conformance suite every [idem.Store] runs: the
// document contract, the middleware, merge rules and side-effect markers, the
// same subtests on every backend. A backend's test file is a harness that
// says what the store supports, and one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T, now func() time.Time) idem.Store {
//				return memory.New(&memory.Options{Now: now})
//			},
//			MaxDocumentBytes: 1 << 20,
//			Reader:           true,
//			ReadOnlyRunner:   true,
//			Sweeper:          true,
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/mwlib"
)

// Harness tells the suite how to make stores of one backend and what they
// support. The suite fails, not skips, where a store does not do what its
// harness declares.
type Harness struct {
	// New returns a new, empty store whose clock (for expiry) is now. The
	// suite calls it once per subtest and may run subtests in parallel. The
	// harness cleans up with t.Cleanup.
	New func(t *testing.T, now func() time.Time) idem.Store

	// MaxDocumentBytes is the largest JSON document the store accepts; the
	// suite checks that one byte more fails with idem.ErrTooLarge.
	MaxDocumentBytes int

	// Reader, ReadOnlyRunner, Sweeper and Expirer declare the optional
	// capabilities the store has ([backend.Reader],
	// [backend.ReadOnlyRunner], [backend.Sweeper], [backend.Expirer]). The
	// suite tests each one declared, and fails if a store lacks one its
	// harness declares or has one its harness does not.
	Reader, ReadOnlyRunner, Sweeper, Expirer bool

	// As lists the native handles Tx.As hands out, each as a pointer to a
	// variable of its type: new(*sql.Conn), new(pgx.Tx). The suite checks
	// that As fills each inside fn and refuses other targets. Empty: As
	// hands out nothing.
	As []any

	// AsWrite, when set, writes a record named id through tx's native
	// handle into storage of the harness's own (a table, a collection), and
	// AsRead, which must then be set too, reports whether that record is
	// there, reading through tx's native handle. The suite checks that such
	// writes commit with the Tx and roll back with it.
	AsWrite func(ctx context.Context, tx idem.Tx, id string) error
	AsRead  func(ctx context.Context, tx idem.Tx, id string) (bool, error)

	// Serialized is true for stores that run write transactions one at a
	// time (SQLite's BEGIN IMMEDIATE): they never make fn lose a race, so the
	// subtests that force a retry of fn check only the outcome.
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

	// mwLibrary is the MCP library the middleware cases run through; nil
	// for the go-sdk.
	mwLibrary mwlib.Library
}

// library is the MCP library h's middleware cases run through.
func (h Harness) library() mwlib.Library {
	if h.mwLibrary == nil {
		return goSDK{}
	}
	return h.mwLibrary
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
	if (h.AsWrite == nil) != (h.AsRead == nil) {
		t.Fatal("storetest: Harness.AsWrite and AsRead go together")
	}
	t.Run("Capabilities", func(t *testing.T) { t.Parallel(); testCapabilities(t, h) })
	t.Run("Contract", func(t *testing.T) { runContract(t, h) })
	t.Run("As", func(t *testing.T) { runAs(t, h) })
	t.Run("Reader", func(t *testing.T) { runReader(t, h) })
	t.Run("ReadOnly", func(t *testing.T) { runReadOnly(t, h) })
	t.Run("Consistency", func(t *testing.T) { runConsistency(t, h) })
	t.Run("Middleware", func(t *testing.T) { runMiddleware(t, h) })
	t.Run("Guard", func(t *testing.T) { runGuard(t, h) })
	t.Run("Merge", func(t *testing.T) { runMerge(t, h) })
	t.Run("SideEffect", func(t *testing.T) { runSideEffect(t, h) })
}

// RunMiddleware runs the middleware cases alone, as [Run] does through the
// go-sdk, through the servers of lib: idem's adapter for another MCP library
// (github.com/idemkit/sdk/idem/mcpgo/mcpgotest for mark3labs/mcp-go). Of h,
// it reads New, Reader and Concurrency.
func RunMiddleware(t *testing.T, h Harness, lib mwlib.Library) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	h.mwLibrary = lib
	runMiddleware(t, h)
}

// testCapabilities fails when the store's optional capabilities are not
// the ones its harness declares.
func testCapabilities(t *testing.T, h Harness) {
	for _, e := range capabilityErrors(h.New(t, time.Now), h) {
		t.Error(e)
	}
}

// capabilityErrors says where s's optional capabilities differ from those
// h declares.
func capabilityErrors(s idem.Store, h Harness) []string {
	_, reader := s.(backend.Reader)
	_, readOnly := s.(backend.ReadOnlyRunner)
	_, sweeper := s.(backend.Sweeper)
	expirer, isExpirer := s.(backend.Expirer)
	var errs []string
	for _, c := range []struct {
		name          string
		has, declared bool
	}{
		{"backend.Reader", reader, h.Reader},
		{"backend.ReadOnlyRunner", readOnly, h.ReadOnlyRunner},
		{"backend.Sweeper", sweeper, h.Sweeper},
		{"backend.Expirer", isExpirer, h.Expirer},
	} {
		switch {
		case c.declared && !c.has:
			errs = append(errs, fmt.Sprintf("the harness declares %s, and %T does not implement it", c.name, s))
		case c.has && !c.declared:
			errs = append(errs, fmt.Sprintf("%T implements %s: declare it in the harness, so that the suite tests it", s, c.name))
		}
	}
	switch {
	case sweeper && isExpirer:
		errs = append(errs, fmt.Sprintf("%T is both a backend.Sweeper and a backend.Expirer: who deletes expired documents?", s))
	case isExpirer && expirer.ExpiryField() == "":
		errs = append(errs, fmt.Sprintf("%T is a backend.Expirer that names no ExpiryField", s))
	}
	return errs
}

// capability returns s as the capability C its harness declares, failing
// the test if it is not one.
func capability[C any](t *testing.T, s idem.Store) C {
	t.Helper()
	c, ok := s.(C)
	if !ok {
		t.Fatalf("the harness declares %s, and %T does not implement it", reflect.TypeFor[C](), s)
	}
	return c
}
