package sideeffect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/sideeffect"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/storetest"
)

// runStats is what one transaction did.
type runStats struct {
	docs     int // distinct documents read or written
	writes   int // writes (create, put, update, delete)
	maxBytes int // largest document written, encoded
}

// countingStore records, for every Run, the documents its transaction
// touched (on the last attempt).
type countingStore struct {
	idem.Store
	mu   sync.Mutex // guards runs
	runs []runStats
}

func (s *countingStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	var st runStats
	err := s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		ct := &countingTx{Tx: tx, seen: map[idem.Key]bool{}}
		err := fn(ctx, ct)
		st = ct.stats
		return err
	})
	s.mu.Lock()
	s.runs = append(s.runs, st)
	s.mu.Unlock()
	return err
}

// take returns the runs recorded since the last take.
func (s *countingStore) take() []runStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs
	s.runs = nil
	return r
}

type countingTx struct {
	idem.Tx
	seen  map[idem.Key]bool
	stats runStats
}

func (t *countingTx) touch(k idem.Key) {
	if !t.seen[k] {
		t.seen[k] = true
		t.stats.docs++
	}
}

func (t *countingTx) wrote(k idem.Key, doc any) {
	t.touch(k)
	t.stats.writes++
	if b, err := json.Marshal(doc); err == nil {
		t.stats.maxBytes = max(t.stats.maxBytes, len(b))
	}
}

func (t *countingTx) Get(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	t.touch(k)
	return t.Tx.Get(ctx, k, dst)
}

func (t *countingTx) Create(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	t.wrote(k, doc)
	return t.Tx.Create(ctx, k, doc, opts...)
}

func (t *countingTx) Put(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	t.wrote(k, doc)
	return t.Tx.Put(ctx, k, doc, opts...)
}

func (t *countingTx) Update(ctx context.Context, k idem.Key, v idem.Version, doc any, opts ...backend.WriteOption) error {
	t.wrote(k, doc)
	return t.Tx.Update(ctx, k, v, doc, opts...)
}

func (t *countingTx) Delete(ctx context.Context, k idem.Key, v idem.Version) error {
	t.wrote(k, nil)
	return t.Tx.Delete(ctx, k, v)
}

func maxStats(runs []runStats) runStats {
	var m runStats
	for _, r := range runs {
		m.docs = max(m.docs, r.docs)
		m.writes = max(m.writes, r.writes)
		m.maxBytes = max(m.maxBytes, r.maxBytes)
	}
	return m
}

// A large backlog of open markers (a target down for long) keeps every
// Intend and completion at a bounded cost and every document small: the
// index is paged, not one growing document per shard.
func TestIndexBacklogIsPaged(t *testing.T) {
	const (
		n = 3000
		// docLimit is above one index page (16 KiB of keys) and
		// below what a shard holding n/16 keys of 192 bytes would take.
		docLimit = 20_000
	)
	clk := storetest.NewClock(epoch)
	mem := memory.New(&memory.Options{Now: clk.Now, MaxDocumentBytes: 400_000})
	s := &countingStore{Store: mem}
	fx := effects(s, clk, sideeffect.Options{})
	ctx := context.Background()

	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%06d.%s", i, strings.Repeat("k", 185))
		if len(keys[i]) != 192 {
			t.Fatalf("key length %d", len(keys[i]))
		}
	}
	for _, key := range keys {
		// The business write and the marker, in one transaction.
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, idem.Key{Collection: "posts", ID: key}, map[string]string{"text": "x"}); err != nil {
				return err
			}
			return fx.Intend(ctx, tx, key, map[string]string{"text": "x"})
		})
		if err != nil {
			t.Fatalf("business write with Intend, after a backlog: %v", err)
		}
	}
	intends := s.take()
	// The business document, the marker, the shard head, the current page
	// and a new page when that one is full.
	if m := maxStats(intends); m.docs > 5 || m.writes > 4 || m.maxBytes > docLimit {
		t.Errorf("an Intend touched up to %d documents, wrote %d, largest %d bytes; want <= 5, <= 4, <= %d", m.docs, m.writes, m.maxBytes, docLimit)
	}
	if last := maxStats(intends[n-100:]); last.docs > 5 || last.maxBytes > docLimit {
		t.Errorf("the last Intends touched %d documents, largest %d bytes", last.docs, last.maxBytes)
	}

	got := listKeys(t, fx, sideeffect.Pending)
	if !slices.Equal(got, keys) {
		t.Fatalf("List(pending) returned %d keys, want the %d intended, in order", len(got), n)
	}
	if m := maxStats(s.take()); m.docs >= 100 {
		t.Errorf("a List transaction touched %d documents, want < 100", m.docs)
	}

	// Complete in a scattered order, so pages empty out of order.
	order := slices.Clone(keys)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var p counter
	for i, key := range order {
		if _, err := fx.Once(ctx, key, p.post); err != nil {
			t.Fatalf("Once: %v", err)
		}
		if i == n/2 {
			completions := maxStats(s.take())
			if got := listKeys(t, fx, sideeffect.Pending); len(got) != n-n/2-1 {
				t.Fatalf("List(pending) half way: %d keys, want %d", len(got), n-n/2-1)
			}
			s.take()
			s.runs = append(s.runs, completions)
		}
	}
	if p.n.Load() != n {
		t.Fatalf("posted %d times, want %d", p.n.Load(), n)
	}
	// A completion: the marker, its page, and the head when the page
	// empties.
	if m := maxStats(s.take()); m.docs > 3 || m.maxBytes > docLimit {
		t.Errorf("a claim or completion touched up to %d documents, largest %d bytes; want <= 3, <= %d", m.docs, m.maxBytes, docLimit)
	}
	if got := listKeys(t, fx, sideeffect.Pending); len(got) != 0 {
		t.Fatalf("List(pending) after all done: %d keys", len(got))
	}
	// Emptied pages are gone: listing reads the heads and one current page
	// per shard at most.
	if runs := s.take(); len(runs) > 2 {
		t.Errorf("List of an empty index took %d transactions, want <= 2", len(runs))
	}
}
