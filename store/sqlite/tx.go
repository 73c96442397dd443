package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// tx is one Run's transaction: statements on the Run's connection, inside
// its BEGIN IMMEDIATE, so reads see this tx's own writes. A RunReadOnly's
// is one on a read connection, inside a deferred BEGIN; its writes are
// refused before they reach it (kit.ReadOnly).
type tx struct {
	gate kit.Gate // closed when fn returns
	s    *Store
	conn *sql.Conn
	w    *keptConn // conn, and the statements prepared on it
	// rolledBack is set by SQLite's rollback hook: SQLite ended the
	// transaction by itself (a statement was interrupted, or failed with
	// an I/O or full-disk error). Later statements would run outside any
	// transaction and be kept, so the tx refuses them, and the commit.
	rolledBack atomic.Bool
}

var errRolledBack = errors.New("sqlite: SQLite rolled the transaction back (a statement was interrupted or failed); nothing in it was kept")

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// unixNano is t in Unix nanoseconds, clamped to the int64 range so that
// the order of times is kept (expired stays expired, far future stays live).
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// expiresAt is the expires_at column value for a write with opts: NULL for
// no expiry.
func expiresAt(opts []backend.WriteOption) sql.NullInt64 {
	o := backend.ApplyWriteOptions(opts)
	if o.ExpiresAt.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: unixNano(o.ExpiresAt), Valid: true}
}

// check is the Gate's check, refusing too a transaction SQLite has rolled
// back.
func (t *tx) check(k backend.Key) error {
	if t.rolledBack.Load() {
		return errRolledBack
	}
	return t.gate.Check(k)
}

// checkWrite is check, and then doc encoded within the store's limit.
func (t *tx) checkWrite(k backend.Key, doc any) (string, error) {
	if t.rolledBack.Load() {
		return "", errRolledBack
	}
	b, err := t.gate.CheckWrite(k, doc, t.s.opts.MaxDocumentBytes)
	return string(b), err
}

func (t *tx) nowNano() int64 { return unixNano(t.s.opts.Now()) }

// exec runs one of the store's statements, prepared once per connection.
func (t *tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// The version a write gives is the sequence's next value; bump claims it
// once the write has happened, so versions never repeat.
const nextVersion = `(SELECT last + 1 FROM docs_seq WHERE one = 1)`

func (t *tx) bump(ctx context.Context) error {
	if _, err := t.exec(ctx, `UPDATE docs_seq SET last = last + 1 WHERE one = 1`); err != nil {
		return fmt.Errorf("sqlite: advancing version sequence: %w", err)
	}
	return nil
}

// wrote reports whether res changed a row, and if it did claims the version
// the row got.
func (t *tx) wrote(ctx context.Context, res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: writing document: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	return true, t.bump(ctx)
}

// miss explains why a conditional write at k changed nothing: no live
// document (ErrNotFound) or another version (ErrConflict).
func (t *tx) miss(ctx context.Context, k backend.Key) error {
	if _, err := t.Get(ctx, k, nil); err != nil {
		return err
	}
	return backend.ErrConflict
}

// Get implements [idem.Tx].
func (t *tx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := t.check(k); err != nil {
		return 0, err
	}
	st, err := t.w.stmt(ctx, readQuery)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reading document: %w", err)
	}
	return scanDoc(st.QueryRowContext(ctx, k.Collection, k.StoredID()), t.nowNano(), dst)
}

const readQuery = `SELECT version, doc, expires_at FROM docs WHERE collection = ? AND id = ?`

// scanDoc reads the result of readQuery as live at now (Unix
// nanoseconds).
func scanDoc(row *sql.Row, now int64, dst any) (backend.Version, error) {
	var (
		v   int64
		doc []byte
		exp sql.NullInt64
	)
	err := row.Scan(&v, &doc, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, backend.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: reading document: %w", err)
	}
	if exp.Valid && exp.Int64 <= now {
		return 0, backend.ErrNotFound
	}
	if dst != nil {
		if err := json.Unmarshal(doc, dst); err != nil {
			return 0, fmt.Errorf("sqlite: decoding document: %w", err)
		}
	}
	return backend.Version(v), nil
}

// Create implements [idem.Tx]: one INSERT whose ON CONFLICT replaces the row
// only if it has expired.
func (t *tx) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	res, err := t.exec(ctx,
		`INSERT INTO docs (collection, id, version, doc, expires_at) VALUES (?, ?, `+nextVersion+`, ?, ?)
		ON CONFLICT (collection, id) DO UPDATE
			SET version = excluded.version, doc = excluded.doc, expires_at = excluded.expires_at
			WHERE docs.expires_at IS NOT NULL AND docs.expires_at <= ?`,
		k.Collection, k.StoredID(), b, expiresAt(opts), t.nowNano())
	if err != nil {
		return fmt.Errorf("sqlite: creating document: %w", err)
	}
	ok, err := t.wrote(ctx, res)
	if err != nil {
		return err
	}
	if !ok {
		return backend.ErrExists
	}
	return nil
}

// Put implements [idem.Tx].
func (t *tx) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	res, err := t.exec(ctx,
		`INSERT INTO docs (collection, id, version, doc, expires_at) VALUES (?, ?, `+nextVersion+`, ?, ?)
		ON CONFLICT (collection, id) DO UPDATE
			SET version = excluded.version, doc = excluded.doc, expires_at = excluded.expires_at`,
		k.Collection, k.StoredID(), b, expiresAt(opts))
	if err != nil {
		return fmt.Errorf("sqlite: putting document: %w", err)
	}
	ok, err := t.wrote(ctx, res)
	if err == nil && !ok {
		err = errors.New("sqlite: put changed no row")
	}
	return err
}

// Update implements [idem.Tx]: one UPDATE conditional on the version and on
// the document being live.
func (t *tx) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	res, err := t.exec(ctx,
		`UPDATE docs SET version = `+nextVersion+`, doc = ?, expires_at = ?
		WHERE collection = ? AND id = ? AND version = ? AND (expires_at IS NULL OR expires_at > ?)`,
		b, expiresAt(opts), k.Collection, k.StoredID(), int64(v), t.nowNano())
	if err != nil {
		return fmt.Errorf("sqlite: updating document: %w", err)
	}
	ok, err := t.wrote(ctx, res)
	if err != nil {
		return err
	}
	if !ok {
		return t.miss(ctx, k)
	}
	return nil
}

// Delete implements [idem.Tx].
func (t *tx) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := t.check(k); err != nil {
		return err
	}
	res, err := t.exec(ctx,
		`DELETE FROM docs
		WHERE collection = ? AND id = ? AND (? = 0 OR version = ?) AND (expires_at IS NULL OR expires_at > ?)`,
		k.Collection, k.StoredID(), int64(v), int64(v), t.nowNano())
	if err != nil {
		return fmt.Errorf("sqlite: deleting document: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: deleting document: %w", err)
	}
	if n == 0 {
		return t.miss(ctx, k)
	}
	return nil
}

// As implements [idem.Tx]. With target of type **sql.Conn it sets *target to
// the connection this transaction runs on, so that a server can read and
// write its own tables in the same transaction: what it writes there commits
// or rolls back with the documents. Use the connection only inside fn, and
// never run BEGIN, COMMIT or ROLLBACK on it. In a RunReadOnly the
// connection is read-only (PRAGMA query_only): a write through it fails
// with SQLite's "attempt to write a readonly database".
func (t *tx) As(target any) bool {
	if p, ok := target.(**sql.Conn); ok && p != nil && !t.gate.Closed() {
		*p = t.conn
		return true
	}
	return false
}
