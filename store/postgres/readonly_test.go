package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/postgres"
)

// RunReadOnly's transaction is REPEATABLE READ and READ ONLY, in every
// query mode: the server refuses a write through either native handle
// (25006), and nothing of it is kept.
func TestReadOnlyTransaction(t *testing.T) {
	for name, mode := range map[string]pgx.QueryExecMode{"cache": pgx.QueryExecModeCacheStatement, "exec": pgx.QueryExecModeExec} {
		t.Run(name, func(t *testing.T) {
			pool := newPoolMode(t, 4, mode)
			s := newStore(t, pool, nil)
			var iso, readOnly string
			err := s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
				var q postgres.Querier
				if !tx.As(&q) {
					return errors.New("As(*postgres.Querier) = false")
				}
				if err := q.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso); err != nil {
					return err
				}
				return q.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&readOnly)
			})
			if err != nil || iso != "repeatable read" || readOnly != "on" {
				t.Fatalf("RunReadOnly's transaction: isolation %q, read only %q, %v; want repeatable read, on", iso, readOnly, err)
			}

			insert := `INSERT INTO ` + s.Table() + ` (collection, id, version, doc) VALUES ('native', $1, 1, '{}')`
			for _, handle := range []string{"querier", "pgx.Tx"} {
				var werr error
				_ = s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
					if handle == "querier" {
						var q postgres.Querier
						tx.As(&q)
						_, werr = q.Exec(ctx, insert, handle)
					} else {
						var ptx pgx.Tx
						tx.As(&ptx)
						_, werr = ptx.Exec(ctx, insert, handle)
					}
					return nil
				})
				var pe *pgconn.PgError
				if !errors.As(werr, &pe) || pe.Code != "25006" {
					t.Errorf("a write through the %s of a read-only transaction: %v, want read_only_sql_transaction (25006)", handle, werr)
				}
			}
			var n int
			if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s.Table()+` WHERE collection = 'native'`).Scan(&n); err != nil || n != 0 {
				t.Errorf("rows written through read-only transactions: %d, %v; want none", n, err)
			}
		})
	}
}
