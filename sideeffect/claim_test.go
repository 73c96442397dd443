package sideeffect_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/sideeffect"
)

// looseStore runs transactions on inner but serves reads outside them, so
// its commits check only the conditions of the writes themselves (as a
// backend would that does not guard what a transaction read). The first two
// marker reads wait for each other, so two claimers both see the marker
// pending.
type looseStore struct {
	inner idem.Store
	mu    sync.Mutex // guards reads
	reads int
	both  chan struct{}
}

func (s *looseStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	return s.inner.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fn(ctx, &looseTx{Tx: tx, s: s, wrote: map[idem.Key]bool{}})
	})
}

type looseTx struct {
	idem.Tx
	s     *looseStore
	wrote map[idem.Key]bool
}

func (t *looseTx) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	if t.wrote[k] {
		return t.Tx.Get(ctx, k, dst)
	}
	var v idem.Version
	err := t.s.inner.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var err error
		v, err = tx.Get(ctx, k, dst)
		return err
	})
	if k.Collection == "idem_markers" {
		t.s.mu.Lock()
		t.s.reads++
		n := t.s.reads
		if n == 2 {
			close(t.s.both)
		}
		t.s.mu.Unlock()
		if n <= 2 {
			select {
			case <-t.s.both:
			case <-time.After(5 * time.Second):
			}
		}
	}
	return v, err
}

func (t *looseTx) Create(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	t.wrote[k] = true
	return t.Tx.Create(ctx, k, doc, opts...)
}

func (t *looseTx) Put(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	t.wrote[k] = true
	return t.Tx.Put(ctx, k, doc, opts...)
}

func (t *looseTx) Update(ctx context.Context, k idem.Key, v idem.Version, doc any, opts ...backend.WriteOption) error {
	t.wrote[k] = true
	return t.Tx.Update(ctx, k, v, doc, opts...)
}

// The claim is a write conditional on the version read, not only a read
// followed by a write: two claimers that both read the marker pending, on a
// store that would not catch that by itself, still post once.
func TestClaimIsAConditionalWrite(t *testing.T) {
	inner, clk := newStore(t)
	intend(t, inner, clk, "k", "p")
	s := &looseStore{inner: inner, both: make(chan struct{})}
	var c counter
	var wg sync.WaitGroup
	refs := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			refs[i], errs[i] = sideeffect.Once(context.Background(), s, "k", c.post, opts(clk, sideeffect.Wait(10*time.Second))...)
		})
	}
	wg.Wait()
	if got := c.n.Load(); got != 1 {
		t.Errorf("two claimers that both read the marker pending posted %d times, want 1", got)
	}
	for i := range 2 {
		if errs[i] != nil || refs[i] != "ref-1" {
			t.Errorf("caller %d = %q, %v; want ref-1", i, refs[i], errs[i])
		}
	}
}
