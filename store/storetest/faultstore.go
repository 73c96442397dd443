package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
)

// The stores in this file wrap a harness's store to fail in one way a real
// backend can, so that the middleware suite sees every backend fail alike.

// noReader hides a store's optional capabilities.
type noReader struct{ idem.Store }

// staleReads is a store whose first attempt of every transaction does not
// see op records, as a read from a stale snapshot or a lagging replica would
// not. Only the op record's create-if-absent then stands between a repeat and
// a second commit.
type staleReads struct{ idem.Store }

func (s staleReads) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	attempt := 0
	return s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		attempt++
		if attempt == 1 {
			tx = staleTx{tx}
		}
		return fn(ctx, tx)
	})
}

// Read misses op records too, as a lagging replica would.
func (s staleReads) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	if k.Collection == oprecord.Collection {
		return 0, idem.ErrNotFound
	}
	return readThrough(ctx, s.Store, k, dst)
}

type staleTx struct{ idem.Tx }

func (t staleTx) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	if k.Collection == oprecord.Collection {
		return 0, idem.ErrNotFound
	}
	return t.Tx.Get(ctx, k, dst)
}

// unknownCommit reports ErrUnknownOutcome from Run, after committing when
// committed is true and after rolling back otherwise: a connection lost
// during COMMIT, seen from either side of the commit.
type unknownCommit struct {
	idem.Store
	committed bool
	armed     atomic.Bool
}

var errLostCommit = errors.New("storetest: connection lost during COMMIT")

// readThrough reads k through s's Reader, so that a wrapper keeps the
// capability visible, or answers errNoReader when s has none.
func readThrough(ctx context.Context, s idem.Store, k idem.Key, dst any) (idem.Version, error) {
	if r, ok := s.(backend.Reader); ok {
		return r.Read(ctx, k, dst)
	}
	return 0, errNoReader
}

// errNoReader is what a wrapper's Read answers over a store without one:
// not ErrNotFound, so the middleware reads inside the transaction instead.
var errNoReader = errors.New("storetest: the wrapped store has no Reader")

// Read passes through, so the Reader path is tested with lost commits too.
func (s *unknownCommit) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	return readThrough(ctx, s.Store, k, dst)
}

func (s *unknownCommit) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.Run(ctx, fn)
	}
	err := s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		if !s.committed {
			return errLostCommit
		}
		return nil
	})
	if err == nil || errors.Is(err, errLostCommit) {
		return fmt.Errorf("%w: %w", idem.ErrUnknownOutcome, errLostCommit)
	}
	return err
}

// gaveUp is a store whose armed Run calls fn once, rolls back what it wrote
// and gives up as a store does after losing too many races: with an error
// wrapping ErrConflict.
type gaveUp struct {
	idem.Store
	armed atomic.Bool
}

var errGaveUp = errors.New("storetest: lost every race")

// Read passes through, so the Reader path is tested too.
func (s *gaveUp) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	return readThrough(ctx, s.Store, k, dst)
}

func (s *gaveUp) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.Run(ctx, fn)
	}
	err := s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_ = fn(ctx, tx)
		return errGaveUp
	})
	if !errors.Is(err, errGaveUp) {
		return err
	}
	return fmt.Errorf("%w: %w", idem.ErrConflict, errGaveUp)
}
