package memory_test

import (
	"context"
	"testing"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// A transaction that read back the version of its own blind write, while
// another transaction wrote the key and committed, runs again: the version
// it saw must be the one stored, and versions only go up.
func TestVersionSeenForOwnWriteIsTheStoredOne(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	k := idem.Key{Collection: "c", ID: "k"}
	var seen idem.Version
	attempts := 0
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		attempts++
		if err := tx.Put(ctx, k, attempts); err != nil {
			return err
		}
		v, err := tx.Get(ctx, k, nil)
		if err != nil {
			return err
		}
		seen = v
		if attempts == 1 {
			return s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, 100) })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(ctx, k, nil)
	if err != nil || got != seen || attempts != 2 {
		t.Errorf("stored version %d, seen %d, %d attempts (%v); want the seen one, after a second attempt", got, seen, attempts, err)
	}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Update(ctx, k, seen, 3) }); err != nil {
		t.Errorf("Update at the version the writer saw: %v", err)
	}
}
