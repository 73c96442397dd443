package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// sweepDoc is a document testSweepManyBatches writes: its key and its
// expiry (zero: never).
type sweepDoc struct {
	k   idem.Key
	exp time.Time
}

// testSweepManyBatches: a sweep far larger than any store's batch deletes
// exactly the expired documents, never a live one, and says when none is
// left; documents written later with an earlier expiry than those already
// swept are found by the next sweep.
func testSweepManyBatches(t *testing.T, h Harness) {
	if !h.Sweeper {
		t.Skip("the harness declares no backend.Sweeper")
	}
	c := newContract(t, h)
	sw := capability[backend.Sweeper](t, c.s)
	// More expiring documents than any store deletes in one batch
	// (PostgreSQL's 100, SQLite's 16).
	const expiring, never, later = 600, 100, 100
	now := c.clock.Now()
	var docs []sweepDoc
	for i := range expiring {
		docs = append(docs, sweepDoc{ckey(fmt.Sprintf("x%04d", i)), now.Add(time.Duration(i+1) * time.Millisecond)})
	}
	for i := range never {
		docs = append(docs, sweepDoc{ckey(fmt.Sprintf("n%04d", i)), time.Time{}})
	}
	for i := range later {
		docs = append(docs, sweepDoc{ckey(fmt.Sprintf("l%04d", i)), now.Add(time.Hour + time.Duration(i)*time.Millisecond)})
	}
	// Written in random order, so that neither the keys nor the order of
	// writing follow the expiry.
	rand.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	c.putSweepDocs(docs)

	c.clock.Advance(2 * time.Second)
	c.sweepWant(sw, 400, 400)
	c.sweepWant(sw, 400, expiring-400)
	c.sweepWant(sw, 400, 0)
	c.wantLiveSweepDocs(docs)

	// Written after the sweep, already expired, and earlier than every
	// document swept so far (a server with a shorter TTL, or a transaction
	// the sweep could not see yet).
	var early []sweepDoc
	for i := range 30 {
		early = append(early, sweepDoc{ckey(fmt.Sprintf("e%04d", i)), now.Add(time.Duration(i) * time.Microsecond)})
	}
	c.putSweepDocs(early)
	c.sweepWant(sw, 1000, len(early))
	c.wantLiveSweepDocs(early)

	c.clock.Advance(2 * time.Hour)
	c.sweepWant(sw, 1000, later)
	c.wantLiveSweepDocs(docs)
}

// testSweepRewritten: a sweep goes by each document's latest write, not by
// an expiry it had before: a document rewritten with a later expiry, with
// none, or deleted and written again, outlives its first expiry; one
// rewritten with an earlier expiry is swept at that one; an expiry a
// document no longer has does not hide the expired ones after it; and a
// document written again with a later expiry in the middle of a backlog's
// sweep stays.
func testSweepRewritten(t *testing.T, h Harness) {
	if !h.Sweeper {
		t.Skip("the harness declares no backend.Sweeper")
	}
	c := newContract(t, h)
	sw := capability[backend.Sweeper](t, c.s)
	now := c.clock.Now()
	var first, then []sweepDoc
	// The last one expires between the others' first expiry and now: a
	// sweep that stops at a first expiry whose document lives on misses it.
	for i, exp := range []time.Time{now.Add(time.Hour), {}, now.Add(time.Hour), now.Add(500 * time.Millisecond), now.Add(1500 * time.Millisecond)} {
		k := ckey(fmt.Sprintf("r%d", i))
		first = append(first, sweepDoc{k, now.Add(time.Second)})
		then = append(then, sweepDoc{k, exp})
	}
	first[4].exp = then[4].exp
	c.putSweepDocs(first)
	wantErr(t, "Delete", c.delete(then[2].k, 0), nil)
	c.putSweepDocs(then)

	c.clock.Advance(2 * time.Second)
	c.sweepWant(sw, 10, 2)
	c.sweepWant(sw, 10, 0)
	c.wantLiveSweepDocs(then)

	// Written again with a later expiry between two sweeps of one backlog
	// (a store may have found them expired in the first).
	now = c.clock.Now()
	var backlog, again []sweepDoc
	for i := range 20 {
		k := ckey(fmt.Sprintf("b%02d", i))
		backlog = append(backlog, sweepDoc{k, now.Add(time.Second)})
		again = append(again, sweepDoc{k, now.Add(time.Hour)})
	}
	c.putSweepDocs(backlog)
	c.clock.Advance(2 * time.Second)
	c.sweepWant(sw, 5, 5)
	c.putSweepDocs(again)
	c.sweepWant(sw, 100, 0)
	c.wantLiveSweepDocs(again)
}

// putSweepDocs writes docs, a hundred to a transaction, each numbered by
// its position.
func (c *contract) putSweepDocs(docs []sweepDoc) {
	c.t.Helper()
	for start := 0; start < len(docs); start += 100 {
		c.run(func(ctx context.Context, tx idem.Tx) error {
			for i := start; i < min(start+100, len(docs)); i++ {
				var opts []backend.WriteOption
				if !docs[i].exp.IsZero() {
					opts = append(opts, backend.WithExpiry(docs[i].exp))
				}
				if err := tx.Put(ctx, docs[i].k, contractDoc{N: i}, opts...); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// sweepWant sweeps with limit and fails unless it deleted want documents.
func (c *contract) sweepWant(sw backend.Sweeper, limit, want int) {
	c.t.Helper()
	n, err := sw.Sweep(c.t.Context(), limit)
	if err != nil || n != want {
		c.t.Fatalf("Sweep(%d) = %d, %v; want %d", limit, n, err, want)
	}
}

// wantLiveSweepDocs fails unless each of docs is there, unchanged, if and
// only if it has not expired by the clock.
func (c *contract) wantLiveSweepDocs(docs []sweepDoc) {
	c.t.Helper()
	now := c.clock.Now()
	for start := 0; start < len(docs); start += 100 {
		c.run(func(ctx context.Context, tx idem.Tx) error {
			for i := start; i < min(start+100, len(docs)); i++ {
				live := docs[i].exp.IsZero() || docs[i].exp.After(now)
				var d contractDoc
				_, err := tx.Get(ctx, docs[i].k, &d)
				switch {
				case live && err != nil:
					return fmt.Errorf("live %s: %w", docs[i].k, err)
				case live && d.N != i:
					return fmt.Errorf("live %s holds %+v, want N=%d", docs[i].k, d, i)
				case !live && !errors.Is(err, idem.ErrNotFound):
					return fmt.Errorf("expired %s: Get = %v, want ErrNotFound", docs[i].k, err)
				}
			}
			return nil
		})
	}
}
