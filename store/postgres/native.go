package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// nativeTx is the pgx.Tx that As hands out. Once fn has returned, its
// statements fail with an error instead of running on a connection that is
// back in the pool, perhaps inside another caller's transaction. Their
// errors say what to set when a pooler moved the connection's prepared
// statements (see poolerHint). Conn and
// LargeObjects reach the connection without this guard: do not keep them.
type nativeTx struct {
	pgx.Tx
	t *tx
}

func (n nativeTx) err() error {
	return n.t.gate.Err()
}

func (n nativeTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := n.err(); err != nil {
		return nil, err
	}
	return n.Tx.Begin(ctx)
}

func (n nativeTx) Commit(ctx context.Context) error {
	if err := n.err(); err != nil {
		return err
	}
	return n.Tx.Commit(ctx)
}

func (n nativeTx) Rollback(ctx context.Context) error {
	if err := n.err(); err != nil {
		return err
	}
	return n.Tx.Rollback(ctx)
}

func (n nativeTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := n.err(); err != nil {
		return 0, err
	}
	return n.Tx.CopyFrom(ctx, table, columns, src)
}

func (n nativeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := n.err(); err != nil {
		return errBatch{err}
	}
	return n.Tx.SendBatch(ctx, b)
}

func (n nativeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := n.err(); err != nil {
		return nil, err
	}
	return n.Tx.Prepare(ctx, name, sql)
}

func (n nativeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := n.err(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := n.Tx.Exec(ctx, sql, args...)
	return tag, poolerHint(err)
}

func (n nativeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := n.err(); err != nil {
		return errRows{err}, err
	}
	rows, err := n.Tx.Query(ctx, sql, args...)
	return rows, poolerHint(err)
}

func (n nativeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := n.err(); err != nil {
		return errRows{err}
	}
	return hintRow{n.Tx.QueryRow(ctx, sql, args...)}
}

// hintRow adds to a row's error what to set when a pooler moved the
// connection's prepared statements (see poolerHint).
type hintRow struct{ pgx.Row }

func (r hintRow) Scan(dest ...any) error { return poolerHint(r.Row.Scan(dest...)) }

// failedTx is the pgx.Tx that As hands out when the transaction could not
// begin: every method fails with the reason.
type failedTx struct{ err error }

func (f failedTx) Begin(context.Context) (pgx.Tx, error) { return nil, f.err }
func (f failedTx) Commit(context.Context) error          { return f.err }
func (f failedTx) Rollback(context.Context) error        { return f.err }
func (f failedTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, f.err
}
func (f failedTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return errBatch{f.err} }
func (f failedTx) LargeObjects() pgx.LargeObjects                         { return pgx.LargeObjects{} }
func (f failedTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, f.err
}
func (f failedTx) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, f.err
}
func (f failedTx) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return errRows{f.err}, f.err
}
func (f failedTx) QueryRow(context.Context, string, ...any) pgx.Row { return errRows{f.err} }
func (f failedTx) Conn() *pgx.Conn                                  { return nil }
