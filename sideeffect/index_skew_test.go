package sideeffect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// skewStore runs a hook just before the first Get of a given index page.
type skewStore struct {
	idem.Store
	page idem.Key
	hook func()
}

func (s *skewStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	return s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fn(ctx, &skewTx{Tx: tx, s: s})
	})
}

type skewTx struct {
	idem.Tx
	s *skewStore
}

func (t *skewTx) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	if f := t.s.hook; f != nil && k == t.s.page {
		t.s.hook = nil
		f()
	}
	return t.Tx.Get(ctx, k, dst)
}

func keysInShard(shard, n int, pad int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("k%06d.%s", i, strings.Repeat("x", pad))
		if shardOf(k) == shard {
			out = append(out, k)
		}
	}
	return out
}

func intend(t *testing.T, s idem.Store, key string) {
	t.Helper()
	fx := New(s, nil)
	if err := idem.New(s, nil).Run(context.Background(), func(ctx context.Context, tx idem.Tx) error { return fx.Intend(ctx, tx, key, "p") }); err != nil {
		t.Fatalf("Intend %s: %v", key, err)
	}
}

func okPost(ctx context.Context, key string, p json.RawMessage) (string, error) { return "ref", nil }

// Intend reads the head (Cur = 1), then, before it reads page 1, the shard
// rotates to page 2 and page 1 drains and is deleted. The page read fails
// with ErrNotFound, which is not a conflict, so the store does not retry and
// Intend reads the head (Cur = 1), then, before it reads page 1, the shard
// rotates to page 2 and page 1 drains and is deleted. The reads disagree:
// the store must run the transaction again, not fail the caller's business
// write with ErrNotFound.
func TestIntendReadSkewIsRetried(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(nil)
	keys := keysInShard(3, 200, 480)
	// Fill page 1 until the next key would not fit.
	var onPage1 []string
	i := 0
	for ; ; i++ {
		intend(t, mem, keys[i])
		var h headDoc
		mem.Run(ctx, func(ctx context.Context, tx idem.Tx) error { _, err := tx.Get(ctx, headID(3), &h); return err })
		if h.Cur != 1 {
			t.Fatalf("setup: rotated early")
		}
		onPage1 = append(onPage1, keys[i])
		var p pageDoc
		mem.Run(ctx, func(ctx context.Context, tx idem.Tx) error { _, err := tx.Get(ctx, pageID(3, 1), &p); return err })
		if !p.fits(keys[i+1]) {
			break
		}
	}
	rot, victim := keys[i+1], keys[i+2]
	s := &skewStore{Store: mem, page: pageID(3, 1)}
	s.hook = func() {
		intend(t, mem, rot) // page 1 full: opens page 2
		for _, k := range onPage1 {
			if _, err := New(mem, nil).Once(ctx, k, okPost); err != nil {
				t.Fatalf("Once %s: %v", k, err)
			}
		}
	}
	err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Put(ctx, idem.Key{Collection: "stories", ID: "s1"}, "business"); err != nil {
			return err
		}
		return New(s, nil).Intend(ctx, tx, victim, "p")
	})
	if err != nil {
		t.Fatalf("business write failed: %v (conflict=%v)", err, errors.Is(err, idem.ErrConflict))
	}
}

// A clock without a monotonic reading (time.Now().UTC()) stepped back after
// the claim must not stretch the post past the lease: other processes take
// over at LeaseUntil plus the grace, by their own clocks.
func TestClockSteppedBackKeepsThePostInsideTheLease(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(nil)
	intend(t, mem, "k")
	calls := 0
	ownerClock := func() time.Time {
		calls++
		if calls == 1 {
			return time.Now().UTC() // the claim
		}
		return time.Now().UTC().Add(-time.Hour) // stepped back before the post
	}
	const lease = 200 * time.Millisecond
	var left time.Duration
	owner := New(mem, &Options{Lease: lease, Clock: ownerClock})
	_, err := owner.Once(ctx, "k", func(ctx context.Context, key string, p json.RawMessage) (string, error) {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return "ref", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left <= 0 || left > lease {
		t.Errorf("post deadline %v after its start, want within the %v lease", left, lease)
	}
}
