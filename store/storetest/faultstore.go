package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
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

// writeChecksOnly is a store whose commit checks only the conditions of the
// writes themselves (a Create's absence, an Update's or a conditional
// Delete's version), not that what fn read is unchanged: fn's reads are
// served from the committed state outside any transaction, and its writes
// are applied after fn returns, in a transaction of their own. Code that
// reads and then writes keeps its guarantee here only if the write is
// conditional on what it read: a blind write loses a concurrent writer's
// change. afterRead, when set, is called after each of fn's reads; the
// cases use it to make two callers read before either writes.
type writeChecksOnly struct {
	idem.Store
	afterRead func(k idem.Key)
}

// errWriteCondition marks a write whose condition failed when the writes
// were applied: fn is called again, as a store calls it again after its
// commit lost a race.
var errWriteCondition = errors.New("storetest: a write's condition failed at commit")

func (s *writeChecksOnly) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	r := kit.Retry{Store: "storetest", MaxAttempts: 100, Base: time.Millisecond, Cap: 20 * time.Millisecond}
	return r.Do(ctx, func() error {
		tx := &writesAtEnd{s: s, wrote: map[idem.Key]bool{}}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return s.Store.Run(ctx, func(ctx context.Context, inner idem.Tx) error {
			for _, w := range tx.writes {
				if err := w(ctx, inner); err != nil {
					// Not wrapping the store's error: Run must not
					// retry the writes alone.
					return fmt.Errorf("%w: %v", errWriteCondition, err)
				}
			}
			return nil
		})
	}, func(err error) kit.Next {
		if errors.Is(err, errWriteCondition) || errors.Is(err, idem.ErrConflict) {
			return kit.Again
		}
		return kit.Stop
	})
}

// writesAtEnd is a transaction of writeChecksOnly.
type writesAtEnd struct {
	s      *writeChecksOnly
	wrote  map[idem.Key]bool
	writes []func(ctx context.Context, tx idem.Tx) error
}

// Get reads the committed state.
func (t *writesAtEnd) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	v, err := t.read(ctx, k, dst)
	if t.s.afterRead != nil {
		t.s.afterRead(k)
	}
	return v, err
}

// read reads k's committed state. The cases read no key after writing it.
func (t *writesAtEnd) read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	if t.wrote[k] {
		return 0, fmt.Errorf("storetest: writeChecksOnly reads no key after writing it (%s)", k)
	}
	var v idem.Version
	err := t.s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, k, dst)
		return err
	})
	return v, err
}

// write checks cond against the committed state now, as a store checks a
// write when it is made, and queues w to run, with its own checks, after
// fn.
func (t *writesAtEnd) write(ctx context.Context, k idem.Key, cond func(v idem.Version, err error) error, w func(ctx context.Context, tx idem.Tx) error) error {
	if cond != nil {
		v, err := t.read(ctx, k, nil)
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			return err
		}
		if err := cond(v, err); err != nil {
			return err
		}
	}
	t.wrote[k] = true
	t.writes = append(t.writes, w)
	return nil
}

func (t *writesAtEnd) Create(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	return t.write(ctx, k, func(v idem.Version, err error) error {
		if err == nil {
			return idem.ErrExists
		}
		return nil
	}, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, doc, opts...) })
}

func (t *writesAtEnd) Put(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	return t.write(ctx, k, nil, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, doc, opts...) })
}

func (t *writesAtEnd) Update(ctx context.Context, k idem.Key, v idem.Version, doc any, opts ...backend.WriteOption) error {
	return t.write(ctx, k, atVersion(v), func(ctx context.Context, tx idem.Tx) error { return tx.Update(ctx, k, v, doc, opts...) })
}

func (t *writesAtEnd) Delete(ctx context.Context, k idem.Key, v idem.Version) error {
	return t.write(ctx, k, atVersion(v), func(ctx context.Context, tx idem.Tx) error { return tx.Delete(ctx, k, v) })
}

func (t *writesAtEnd) As(target any) bool { return false }

// atVersion is the condition of an Update or a Delete at v (0: any
// version, for a Delete).
func atVersion(v idem.Version) func(idem.Version, error) error {
	return func(cur idem.Version, err error) error {
		switch {
		case err != nil:
			return err
		case v != 0 && cur != v:
			return idem.ErrConflict
		}
		return nil
	}
}
