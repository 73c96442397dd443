package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is a handle on a Run transaction for statements of your own, with
// the methods of a pgx.Tx that send statements. It is the DBTX interface
// that sqlc generates for pgx/v5, so generated code takes it as is:
//
//	var q postgres.Querier
//	if !tx.As(&q) { ... }
//	queries := db.New(q) // sqlc
//
// Unlike the pgx.Tx that As also hands out, a Querier does not begin the
// transaction when As is called. Exec and QueryRow go out pipelined with
// whatever the Tx has not sent yet (BEGIN, a Put, a deferred Create): the
// first statement of a handler costs one round trip, BEGIN included. A
// statement sent through the Querier sees every earlier write of the Tx.
//
// Exec with arguments and QueryRow send one statement each (the extended
// protocol). Exec without arguments first begins the transaction and sends
// any waiting writes, then sends its SQL with the simple protocol, as
// pgx.Tx.Exec does, so it may hold several statements. QueryRow sends its
// statement when Scan is called, and Scan may be called once. Query,
// SendBatch and CopyFrom first begin the transaction and send the waiting
// writes, then run on the transaction's pgx.Tx.
//
// A statement that fails aborts the transaction, as in PostgreSQL: later
// statements on the Tx fail, and Run rolls back and returns the error (or
// retries fn if it is a serialization failure, deadlock or unique
// violation), even if fn returns nil. pgx.ErrNoRows from QueryRow's Scan is
// not a failure: it is returned as is and the transaction goes on. Errors of
// Exec and QueryRow wrap the native error (errors.As finds the
// *pgconn.PgError, errors.Is finds pgx.ErrNoRows) and, for a lost race,
// idem.ErrConflict. Do not end the transaction through the Querier (no
// COMMIT or ROLLBACK statements): return from fn instead. A Querier is valid
// only until fn returns; later calls fail.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
}

// querier is the Querier of one tx.
type querier struct{ t *tx }

var _ Querier = querier{}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t := q.t
	if err := t.gate.Err(); err != nil {
		return pgconn.CommandTag{}, err
	}
	if len(args) == 0 {
		// pgx sends an Exec without arguments with the simple protocol,
		// which allows several statements in one string; a pipeline
		// does not. Begin first, so send below takes the direct path.
		if err := t.send(ctx, nil); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	var tag pgconn.CommandTag
	err := t.send(ctx, &pending{sql: sql, args: args, exec: func(ct pgconn.CommandTag) { tag = ct }})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tag, nil
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &row{t: q.t, ctx: ctx, sql: sql, args: args}
}

// row is QueryRow's result: the statement goes out when Scan is called.
type row struct {
	t       *tx
	ctx     context.Context
	sql     string
	args    []any
	scanned bool
}

func (r *row) Scan(dest ...any) error {
	if r.scanned {
		return errors.New("postgres: Row.Scan called twice")
	}
	r.scanned = true
	if err := r.t.gate.Err(); err != nil {
		return err
	}
	noRows := false
	err := r.t.send(r.ctx, &pending{sql: r.sql, args: r.args, scan: func(row pgx.Row) error {
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			// An empty result is an answer, not a failure: the
			// transaction goes on.
			noRows = true
			return nil
		}
		return err
	}})
	if err != nil {
		return err
	}
	if noRows {
		return pgx.ErrNoRows
	}
	return nil
}

// begun begins the transaction and sends the waiting writes, for the methods
// that run on the pgx.Tx.
func (q querier) begun(ctx context.Context) (pgx.Tx, error) {
	if err := q.t.gate.Err(); err != nil {
		return nil, err
	}
	if err := q.t.send(ctx, nil); err != nil {
		return nil, err
	}
	return q.t.ptx, nil
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ptx, err := q.begun(ctx)
	if err != nil {
		return errRows{err}, err
	}
	return ptx.Query(ctx, sql, args...)
}

func (q querier) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	ptx, err := q.begun(ctx)
	if err != nil {
		return errBatch{err}
	}
	return ptx.SendBatch(ctx, b)
}

func (q querier) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	ptx, err := q.begun(ctx)
	if err != nil {
		return 0, err
	}
	return ptx.CopyFrom(ctx, tableName, columnNames, rowSrc)
}

// errRows is the pgx.Rows of a Query that could not be sent.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }

// errBatch is the pgx.BatchResults of a SendBatch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return errRows(b), b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRows(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
