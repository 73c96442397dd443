package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/sdk/idem"
)

// A pgx.Tx kept past Run (by a goroutine of the handler, say) refuses its
// statements: the connection is back in the pool, perhaps in another
// caller's transaction.
func TestNativeTxAfterRunIsRefused(t *testing.T) {
	pool := newPool(t, 1)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	var kept pgx.Tx
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if !tx.As(&kept) {
			t.Fatal("As(*pgx.Tx) = false")
		}
		_, err := kept.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS kept_t (x int)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("Exec on a kept pgx.Tx ran after Run returned")
	}
	var one int
	if err := kept.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Error("QueryRow on a kept pgx.Tx ran after Run returned")
	}
	if rows, err := kept.Query(ctx, "SELECT 1"); err == nil {
		rows.Close()
		t.Error("Query on a kept pgx.Tx ran after Run returned")
	}
	br := kept.SendBatch(ctx, &pgx.Batch{})
	if err := br.Close(); err == nil {
		t.Error("SendBatch on a kept pgx.Tx ran after Run returned")
	}
	if err := kept.Commit(ctx); err == nil {
		t.Error("Commit on a kept pgx.Tx ran after Run returned")
	}
	// The pooled connection works for the next Run.
	k := idem.Key{Collection: "c", ID: "next"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, 1) }); err != nil {
		t.Fatalf("next Run: %v", err)
	}
}
