package sideeffect

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/memory"
)

// interleave is a store whose transactions run a hook just before their
// first Create in the marker index: the moment another Intend can commit
// the head or page this one found absent.
type interleave struct {
	idem.Store
	before func()
}

func (s *interleave) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	return s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fn(ctx, &interleaveTx{Tx: tx, s: s})
	})
}

type interleaveTx struct {
	idem.Tx
	s *interleave
}

func (t *interleaveTx) Create(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	if f := t.s.before; f != nil && k.Collection == indexCollection {
		t.s.before = nil
		f()
	}
	return t.Tx.Create(ctx, k, doc, opts...)
}

// Two Intends of keys in one shard both find the shard's head absent; the
// one that commits second must be retried by the store, not fail the
// caller's write with ErrExists.
func TestIntendLosingTheIndexCreateRaceIsRetried(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(nil)
	var a, b string
	for i := 0; b == ""; i++ {
		k := fmt.Sprintf("post.%d", i)
		switch {
		case a == "":
			a = k
		case shardOf(k) == shardOf(a):
			b = k
		}
	}
	fx := New(mem, nil)
	s := &interleave{Store: mem}
	s.before = func() {
		if err := idem.New(mem, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error { return fx.Intend(ctx, tx, a, "A") }); err != nil {
			t.Fatalf("Intend A: %v", err)
		}
	}
	if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error { return fx.Intend(ctx, tx, b, "B") }); err != nil {
		t.Fatalf("Intend B lost the race to create the index and failed: %v", err)
	}
	ms, err := fx.List(ctx, Pending)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	if !slices.Contains(keys, a) || !slices.Contains(keys, b) {
		t.Errorf("listed %v, want both %s and %s", keys, a, b)
	}
}
