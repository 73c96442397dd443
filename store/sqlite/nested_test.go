package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// A context that outlives its Run (kept by an AfterCommit hook, or a
// background goroutine) starts Runs normally; only a Run from inside a
// running fn is refused.
func TestContextOfAFinishedRunStartsRuns(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "n.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	k := idem.Key{Collection: "c", ID: "k"}
	var kept context.Context
	err = idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		kept = ctx
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return nil }); err == nil {
			t.Error("a Run from inside fn, with fn's context, was not refused")
		}
		if !idem.AfterCommit(ctx, func(context.Context) {
			// The natural hook: the fn's context, captured.
			if err := s.Run(kept, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, 1) }); err != nil {
				t.Errorf("Run from an after-commit hook: %v", err)
			}
		}) {
			t.Error("AfterCommit refused the context of idem.Run's fn")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, k, nil); err != nil {
		t.Errorf("the hook's write: %v", err)
	}
}
