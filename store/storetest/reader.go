package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// runReader checks the optional Reader capability, and CreateAtCommit on
// every store (a store may honour it or ignore it; either way a live
// document is never replaced).
func runReader(t *testing.T, h Harness) {
	ctx := context.Background()
	k := idem.Key{Collection: "reader", ID: "doc"}
	t.Run("Read", func(t *testing.T) {
		t.Parallel()
		if !h.Reader {
			t.Skip("the harness declares no backend.Reader")
		}
		clock := NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		s := h.New(t, clock.Now)
		r := capability[backend.Reader](t, s)
		if _, err := r.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Read of an absent document: %v, want ErrNotFound", err)
		}
		if _, err := r.Read(ctx, idem.Key{Collection: "Bad/", ID: "x"}, nil); !errors.Is(err, backend.ErrInvalidKey) {
			t.Fatalf("Read of an invalid key: %v, want ErrInvalidKey", err)
		}
		var inTx idem.Version
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Create(ctx, k, doc{N: 1}, backend.WithExpiry(clock.Now().Add(time.Minute))); err != nil {
				return err
			}
			// Not committed yet: a Read outside does not see it.
			if _, err := r.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
				return fmt.Errorf("Read saw an uncommitted write: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			var e error
			inTx, e = tx.Get(ctx, k, nil)
			return e
		})
		if err != nil {
			t.Fatal(err)
		}
		var got doc
		v, err := r.Read(ctx, k, &got)
		if err != nil || got.N != 1 || v != inTx {
			t.Fatalf("Read = %+v, version %d, %v; want N=1 at the version Get saw (%d)", got, v, err, inTx)
		}
		clock.Advance(time.Minute)
		if _, err := r.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Read of an expired document: %v, want ErrNotFound", err)
		}
	})

	t.Run("CreateAtCommitNeverReplacesALiveDocument", func(t *testing.T) {
		t.Parallel()
		clock := NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		s := h.New(t, clock.Now)
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, doc{N: 1}) }); err != nil {
			t.Fatal(err)
		}
		attempts := 0
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			if attempts > 1 {
				return nil // the next attempt reads the document and writes nothing
			}
			err := tx.Create(ctx, k, doc{N: 2}, backend.CreateAtCommit())
			if errors.Is(err, idem.ErrExists) {
				return fmt.Errorf("%w: exists", idem.ErrConflict)
			}
			return err
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if attempts != 2 {
			t.Errorf("fn ran %d times, want 2 (the deferred Create must fail its attempt)", attempts)
		}
		var got doc
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, &got)
			return err
		})
		if err != nil || got.N != 1 {
			t.Fatalf("document after a deferred Create: %+v, %v; want the first one", got, err)
		}
		// Over an expired document it succeeds in one attempt.
		ke := idem.Key{Collection: "reader", ID: "expired"}
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return tx.Create(ctx, ke, doc{N: 1}, backend.WithExpiry(clock.Now().Add(time.Second)))
		}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		attempts = 0
		err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			return tx.Create(ctx, ke, doc{N: 3}, backend.CreateAtCommit())
		})
		if err != nil || attempts != 1 {
			t.Fatalf("deferred Create over an expired document: %v after %d attempts", err, attempts)
		}
	})
}

type doc struct {
	N int `json:"n"`
}
