package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// BackgroundSweep tests the background sweep of a store that sweeps
// itself (a backend.Sweeper opened with its sweep on). open returns a new,
// empty store whose clock is now and whose sweep follows o (Off, Every and
// Report, the store's Options NoSweep, SweepEvery and OnSweep), and its
// Close. With the sweep on, expired documents are deleted with nothing
// calling Sweep, every round is reported, and no round runs after Close;
// with it off, no round runs and the expired documents stay for Sweep.
func BackgroundSweep(t *testing.T, open func(t *testing.T, now func() time.Time, o kit.SweepOptions) (idem.Store, func() error)) {
	t.Run("On", func(t *testing.T) {
		clock := NewClock(time.Now())
		var r sweepRounds
		s, closeStore := open(t, clock.Now, kit.SweepOptions{Every: 20 * time.Millisecond, Report: r.add})
		putExpiring(t, s, clock, 3)
		clock.Advance(2 * time.Second)
		for end := time.Now().Add(10 * time.Second); r.deleted() < 3; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("10 s after 3 documents expired, the background sweep has deleted %d in %d rounds (errors: %v)", r.deleted(), r.count(), r.errs())
			}
		}
		if errs := r.errs(); len(errs) > 0 {
			t.Errorf("rounds failed: %v", errs)
		}
		if n := sweepNow(t, s); n != 0 {
			t.Errorf("Sweep after the background sweep deleted %d, want 0", n)
		}
		if err := closeStore(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		rounds := r.count()
		time.Sleep(200 * time.Millisecond) // ten times the wait between rounds
		if n := r.count(); n != rounds {
			t.Errorf("%d rounds after Close", n-rounds)
		}
	})
	t.Run("Off", func(t *testing.T) {
		clock := NewClock(time.Now())
		var r sweepRounds
		s, closeStore := open(t, clock.Now, kit.SweepOptions{Off: true, Every: 20 * time.Millisecond, Report: r.add})
		defer closeStore()
		putExpiring(t, s, clock, 3)
		clock.Advance(2 * time.Second)
		time.Sleep(200 * time.Millisecond)
		if n := r.count(); n != 0 {
			t.Errorf("%d rounds with the background sweep off", n)
		}
		if n := sweepNow(t, s); n != 3 {
			t.Errorf("Sweep deleted %d, want the 3 expired documents the background sweep (off) left", n)
		}
	})
}

// putExpiring writes n documents that expire a second from now.
func putExpiring(t *testing.T, s idem.Store, clock *Clock, n int) {
	t.Helper()
	err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		for i := range n {
			k := idem.Key{Collection: "bg", ID: fmt.Sprintf("d%d", i)}
			if err := tx.Put(ctx, k, contractDoc{N: i}, backend.WithExpiry(clock.Now().Add(time.Second))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("writing expiring documents: %v", err)
	}
}

func sweepNow(t *testing.T, s idem.Store) int {
	t.Helper()
	n, err := capability[backend.Sweeper](t, s).Sweep(t.Context(), 100)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return n
}

// sweepRounds collects the rounds a background sweep reports.
type sweepRounds struct {
	mu sync.Mutex
	r  []kit.SweepRound
}

func (r *sweepRounds) add(x kit.SweepRound) { r.mu.Lock(); r.r = append(r.r, x); r.mu.Unlock() }

func (r *sweepRounds) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.r) }

func (r *sweepRounds) deleted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.r {
		n += x.Deleted
	}
	return n
}

func (r *sweepRounds) errs() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, x := range r.r {
		if x.Err != nil {
			errs = append(errs, x.Err)
		}
	}
	return errs
}
