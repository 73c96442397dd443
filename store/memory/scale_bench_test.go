package memory_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/memory"
)

// TestScale is the scale benchmark (storebench.Scale), on demand:
//
//	IDEMKIT_SCALE=1 go test -count=1 -run TestScale -v -timeout 30m ./store/memory
func TestScale(t *testing.T) {
	storebench.Scale(t, storebench.ScaleHarness{
		New: func(t *testing.T, now func() time.Time) storebench.ScaleStore {
			s := memory.New(&memory.Options{Now: now, NoSweep: true}) // the benchmark sweeps
			return storebench.ScaleStore{Store: s, Load: func(ctx context.Context, n int, first time.Time) error {
				return loadOpRecords(ctx, s, n, 1000, first)
			}}
		},
		Sizes: []int{1_000_000},
		Batch: 1024,
		// Calls of a few microseconds: with 400 rounds their medians moved
		// by 2-4x from run to run (the collector marking the loaded heap).
		Rounds: 20_000,
	})
}

// TestScaleLoad checks that the scale benchmark's load leaves records the
// middleware answers from.
func TestScaleLoad(t *testing.T) {
	first := time.Now().Add(time.Hour)
	s := memory.New(nil)
	if err := loadOpRecords(t.Context(), s, 30, 7, first); err != nil {
		t.Fatal(err)
	}
	storebench.CheckScaleLoad(t, s, 30, first)
}

// loadOpRecords creates storebench.ScaleRecord 0..n-1 in s, as the
// middleware writes op records, in transactions of batch creates from two
// workers.
func loadOpRecords(ctx context.Context, s *memory.Store, n, batch int, first time.Time) error {
	return storebench.LoadInBatches(ctx, n, batch, 2, func(ctx context.Context, from, to int) error {
		return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			for i := from; i < to; i++ {
				k, doc, expires, err := storebench.ScaleRecord(i, first)
				if err != nil {
					return err
				}
				if err := tx.Create(ctx, k, json.RawMessage(doc), backend.WithExpiry(expires)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}
