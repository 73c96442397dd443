package firestore_test

import (
	"context"
	"testing"

	"github.com/idemkit/sdk/idem"
)

// TestReadChangedBeforeCommitRunsAgain: a document fn read changes (another
// Run commits) before fn's commit. Whether fn writes that document (here a
// delete without a version, so only the read's precondition guards it) or
// only decides on it (a copy into another document), the attempt must not
// commit: fn runs again and decides on the new state.
func TestReadChangedBeforeCommitRunsAgain(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(ctx context.Context, tx idem.Tx, a, b idem.Key, n int) error
		check func(t *testing.T, got int, gotErr error)
	}{
		{"DeleteOfTheReadDocument", func(ctx context.Context, tx idem.Tx, a, b idem.Key, n int) error {
			if n != 1 {
				return nil // changed since: keep it
			}
			return tx.Delete(ctx, a, 0)
		}, func(t *testing.T, got int, err error) {
			if err != nil || got != 2 {
				t.Fatalf("a = %d, %v; want 2, kept: the delete was decided on 1", got, err)
			}
		}},
		{"CopyToAnotherDocument", func(ctx context.Context, tx idem.Tx, a, b idem.Key, n int) error {
			return tx.Put(ctx, b, n)
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, nil)
			ctx := context.Background()
			a, b := idem.Key{Collection: "docs", ID: "a"}, idem.Key{Collection: "docs", ID: "b"}
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, a, 1) }); err != nil {
				t.Fatal(err)
			}
			attempts := 0
			err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				attempts++
				var n int
				if _, err := tx.Get(ctx, a, &n); err != nil {
					return err
				}
				if attempts == 1 {
					// Another writer commits between fn's read and its
					// commit (outside fn's transaction: a context of its own).
					if err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, a, 2) }); err != nil {
						return err
					}
				}
				return c.write(ctx, tx, a, b, n)
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if attempts != 2 {
				t.Fatalf("fn ran %d time(s); a document it read changed before its commit, want 2", attempts)
			}
			var got int
			if c.check != nil {
				_, err := s.Read(ctx, a, &got)
				c.check(t, got, err)
				return
			}
			if _, err := s.Read(ctx, b, &got); err != nil || got != 2 {
				t.Fatalf("b = %d, %v; want 2, copied from the state that committed", got, err)
			}
		})
	}
}
