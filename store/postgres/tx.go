package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// tx is one attempt's transaction. Statements are pipelined: BEGIN goes out
// with the first statement, and a Put or a Create waits and goes out with
// the next statement or with the COMMIT (a Create still tells fn
// ErrExists: see Create). So a call that creates its documents and its op
// record costs one round trip: BEGIN, the creates and COMMIT.
type tx struct {
	s    *Store
	ctx  context.Context // Run's context, for As, which has none
	conn *pgx.Conn

	begin  string    // the BEGIN statement: beginSQL, or beginReadOnlySQL
	ptx    pgx.Tx    // the native transaction; nil until BEGIN is sent
	queue  []pending // writes not sent yet
	failed error     // the first statement error; the transaction is aborted
	gate   kit.Gate  // closed when fn returns; read by handles fn may have kept
	native bool      // As handed out ptx

	// absent holds the keys a Get of this tx found not live, with the
	// clock reading it judged expiry by, until this tx writes the key. A
	// Create of such a key can wait for the commit: in a SERIALIZABLE
	// transaction it either succeeds or fails the transaction (see
	// queries.createOrFail), so it cannot find a live document instead.
	absent map[backend.Key]time.Time
	// known holds the keys this tx wrote or found live: a Create of one
	// goes out at once, so that fn, which may count on what it saw, is
	// told ErrExists in this attempt.
	known map[backend.Key]bool

	// run is what the attempts of one Run share.
	run *runState
}

// runState is what one Run's attempts share.
type runState struct {
	// taken holds the keys where a Create sent later met a document in
	// an earlier attempt. The attempt failed, so that fn runs again; this
	// time a Create of such a key goes out at once, and returns ErrExists
	// to fn if a live document is still there.
	taken map[backend.Key]bool
}

// pending is one statement and what to do with its result. scan must return
// nil for "no rows": a statement error is the only failure. At most one of
// scan and exec is set.
type pending struct {
	sql  string
	args []any
	scan func(pgx.Row) error     // nil: no result row wanted
	exec func(pgconn.CommandTag) // nil: no command tag wanted
	// promise: a Create that returned nil to fn before it was sent,
	// which an attempt that ends with fn's error must check (see
	// fnFailed).
	promise bool
}

// errLiveDocument: a Create sent later found a document there (live, or
// for queries.insert perhaps expired). The retry sends that Create at once,
// or reads the key first, so Run retries at once instead of backing off:
// there is no contention to wait out.
var errLiveDocument = errors.New("a document was there")

// send sends the queued writes and then last (if not nil) in one round trip,
// beginning the transaction first if it has not begun.
func (t *tx) send(ctx context.Context, last *pending) error {
	if t.failed != nil {
		return fmt.Errorf("postgres: transaction aborted by an earlier error: %w", t.failed)
	}
	if t.ptx != nil && len(t.queue) == 0 {
		if last == nil {
			return nil
		}
		sql, err := t.prepared(ctx, last.sql)
		switch {
		case err != nil:
		case last.scan == nil:
			var tag pgconn.CommandTag
			tag, err = t.conn.Exec(ctx, sql, last.args...)
			if err == nil && last.exec != nil {
				last.exec(tag)
			}
		default:
			err = last.scan(t.conn.QueryRow(ctx, sql, last.args...))
		}
		return t.fail(err)
	}
	b, err := t.batch(ctx)
	if err == nil && last != nil {
		err = t.queueOn(ctx, b, *last)
	}
	if err != nil {
		return t.fail(err)
	}
	br := t.conn.SendBatch(ctx, b)
	if t.ptx == nil {
		t.ptx = br.Tx()
	}
	return t.fail(br.Close())
}

// batch starts the next round trip: BEGIN if the transaction has not begun,
// then the queued writes, which it takes off the queue.
func (t *tx) batch(ctx context.Context) (*pgx.Batch, error) {
	b := &pgx.Batch{}
	if t.ptx == nil {
		begin, err := t.prepared(ctx, t.begin)
		if err != nil {
			return nil, err
		}
		// BeginQuery may name a prepared statement, as any query may; the
		// statement sets the isolation level and the access mode.
		b.BeginTx(pgx.TxOptions{BeginQuery: begin})
	}
	for _, p := range t.queue {
		if err := t.queueOn(ctx, b, p); err != nil {
			return nil, err
		}
	}
	t.queue = nil
	return b, nil
}

// prepared returns what to send for sql: for the store's own statements the
// name of the statement prepared on this connection (once per connection:
// pgx keeps it), else sql. pgx forgets the statements it cached for every
// query of a batch that fails, so with cached statements each lost race
// (a serialization failure, a create that met a live document) would make
// the connection's next call prepare them again, two round trips more.
func (t *tx) prepared(ctx context.Context, sql string) (string, error) {
	return t.s.prepared(ctx, t.conn, sql)
}

// forgetStale reports whether one of errs says a statement the store
// prepared by name is gone from conn (26000 naming it: after DISCARD ALL or
// DEALLOCATE ALL) or no longer fits its table (0A000 from
// RevalidateCachedQuery: "cached plan must not change result type"), and if
// so deallocates the store's statements there, so that their next use
// prepares them again. pgx forgets a statement of its own cache after such
// an error; one prepared by name it keeps until told. conn must be idle.
func (s *Store) forgetStale(ctx context.Context, conn *pgx.Conn, errs ...error) bool {
	if !s.named || conn.IsClosed() || !slices.ContainsFunc(errs, staleStatement) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, name := range s.q.names {
		if conn.Deallocate(ctx, name) != nil {
			return false
		}
	}
	return true
}

func staleStatement(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	// Messages may be localized (quotes included: »«, «»); the routine
	// and the statement's name are not.
	return pe.Code == "26000" && pe.Routine == "FetchPreparedStatement" && strings.Contains(pe.Message, "idemkit_") ||
		pe.Code == "0A000" && pe.Routine == "RevalidateCachedQuery"
}

func (s *Store) prepared(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	name, ok := s.q.names[sql]
	if !ok || !s.named {
		return sql, nil
	}
	if _, err := conn.Prepare(ctx, name, sql); err != nil {
		return "", err
	}
	return name, nil
}

func (t *tx) queueOn(ctx context.Context, b *pgx.Batch, p pending) error {
	sql, err := t.prepared(ctx, p.sql)
	if err != nil {
		return err
	}
	q := b.Queue(sql, p.args...)
	switch {
	case p.scan != nil:
		q.QueryRow(p.scan)
	case p.exec != nil:
		q.Exec(func(ct pgconn.CommandTag) error {
			p.exec(ct)
			return nil
		})
	}
	return nil
}

// fail records a statement error: PostgreSQL has aborted the transaction.
func (t *tx) fail(err error) error {
	if err == nil {
		return nil
	}
	t.failed = mapErr(err)
	return t.failed
}

// mapErr wraps an error of one of the store's own statements so that
// errors.Is finds idem.ErrConflict for a lost race, and errors.As still finds
// the *pgconn.PgError.
func mapErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505":
			return fmt.Errorf("%w: postgres: %w", backend.ErrConflict, err)
		}
		// createOrFail's division by zero (22012) is wrapped with
		// ErrConflict by its own result callback: a statement of fn's
		// that divides by zero is fn's error, not a lost race.
	}
	return poolerHint(fmt.Errorf("postgres: %w", err))
}

// uniqueViolation returns the unique violation (23505) in err's chain, or
// nil.
func uniqueViolation(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return pe
	}
	return nil
}

// errStatementsMoved says what to do when prepared statements are not where
// pgx left them on a connection.
var errStatementsMoved = errors.New("postgres: a prepared statement was missing from the server connection, " +
	"or already there under the same name: the connection is most likely behind a pooler that moves clients between server connections " +
	"(PgBouncer in transaction pooling before 1.21, or without max_prepared_statements), which pgx's default query mode cannot work with; " +
	"set default_query_exec_mode=exec (or simple_protocol) in the connection string, or ConnConfig.DefaultQueryExecMode on the pool, " +
	"or turn on the pooler's prepared statement support (docs/stores.md, \"PostgreSQL\")")

// poolerHint wraps err with errStatementsMoved when it is the server
// refusing a prepared statement of pgx's cache or of the store's own
// (26000: does not exist; 42P05: already exists) that stayed after the
// store's own repair (see forgetStale): a pooler, not a DISCARD ALL.
func poolerHint(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || (pe.Code != "26000" && pe.Code != "42P05") {
		return err
	}
	if !strings.Contains(pe.Message, "stmtcache_") && !strings.Contains(pe.Message, "idemkit_") {
		return err
	}
	return fmt.Errorf("%w: %w", errStatementsMoved, err)
}

// retryable reports whether Run should call fn again after err.
func retryable(err error) bool {
	if errors.Is(err, backend.ErrUnknownOutcome) {
		return false
	}
	if errors.Is(err, backend.ErrConflict) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505":
			return true
		}
	}
	return false
}

// checkWrite makes the Gate's checks of a write and returns doc as the
// JSON text of a jsonb argument: a string, which pgx sends as jsonb with
// every query mode (a []byte would go as bytea in the simple protocol).
func (t *tx) checkWrite(k backend.Key, doc any) (string, error) {
	b, err := t.gate.CheckWrite(k, doc, t.s.opts.MaxDocumentBytes)
	if err != nil {
		return "", err
	}
	if holdsNUL(b) {
		return "", errors.New(`postgres: document holds a NUL character (\u0000), which jsonb cannot store`)
	}
	return string(b), nil
}

// holdsNUL reports whether the JSON text b has a \u0000 escape, which jsonb
// refuses. A check here keeps the error from aborting the transaction.
func holdsNUL(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // skip the escaped character, so `\\u0000` is not a NUL
	}
	return false
}

// expiry is the expires_at argument of a write: NULL for no expiry.
func expiry(opts []backend.WriteOption) any {
	return expiryArg(backend.ApplyWriteOptions(opts))
}

func expiryArg(o backend.WriteOptions) any {
	if o.ExpiresAt.IsZero() {
		return nil
	}
	return o.ExpiresAt
}

// state reads the version and liveness of k.
func (t *tx) state(ctx context.Context, k backend.Key, dst *[]byte) (v int64, live bool, now time.Time, err error) {
	now = t.s.opts.Now()
	if dst == nil {
		dst = new([]byte)
	}
	var exp *time.Time
	found := false
	err = t.send(ctx, &pending{sql: t.s.q.get, args: []any{k.Collection, k.StoredID()}, scan: func(row pgx.Row) error {
		err := row.Scan(&v, dst, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	}})
	if err != nil {
		return 0, false, now, err
	}
	var expires time.Time
	if exp != nil {
		expires = *exp
	}
	return v, found && backend.Live(expires, now), now, nil
}

func (t *tx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := t.gate.Check(k); err != nil {
		return 0, err
	}
	var doc []byte
	v, live, now, err := t.state(ctx, k, &doc)
	if err != nil {
		return 0, err
	}
	if !live {
		t.absent[k] = now
		return 0, backend.ErrNotFound
	}
	t.know(k)
	if dst != nil {
		if err := decodeDoc(doc, dst); err != nil {
			return 0, err
		}
	}
	return backend.Version(v), nil
}

// later reports whether a Create of k, absent as a Get of this tx found it
// or not, and with backend.CreateAtCommit or not, is sent later, and
// whether it is then a promise (see Create).
func (t *tx) later(k backend.Key, absent, atCommit bool) (later, promise bool) {
	switch {
	case absent:
		return true, false
	case t.run.taken[k]:
		return false, false
	case atCommit:
		return true, false
	case t.native, t.known[k], len(t.run.taken) > 0:
		// After a Create sent later met a document, the rest of the
		// Run sends its Creates at once: a pipeline stops at its first
		// failure, so each taken key found later would cost an attempt.
		return false, false
	}
	return true, true
}

// know notes that fn knows the state of k: this tx wrote it, or found it
// live.
func (t *tx) know(k backend.Key) {
	delete(t.absent, k)
	if t.known == nil {
		t.known = make(map[backend.Key]bool)
	}
	t.known[k] = true
}

// Create sends its write later, with the next statement or the COMMIT, and
// returns nil at once, unless this tx wrote k or found it live, fn holds
// the native pgx.Tx (whose statements do not send the waiting writes), or
// an earlier attempt of this Run had a Create sent later meet a document.
// Then it sends the write now, and returns ErrExists if a live document is
// there.
//
// A Create sent later that meets a document fails the statement it goes
// with (mapped to ErrConflict), and the transaction with it, and marks k
// taken: fn runs again, and its Creates then go out at once. So fn is told
// ErrExists as if every Create went out at once, in the attempt that
// commits and in one that ends with fn's error (fnFailed). A Create with
// backend.CreateAtCommit is sent later unless k is taken, and a Create of a
// key a Get of this tx found not live always is: in a SERIALIZABLE
// transaction it either succeeds or fails the transaction, so it cannot
// find a live document instead.
func (t *tx) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	o := backend.ApplyWriteOptions(opts)
	exp := expiryArg(o)
	seen, absent := t.absent[k]
	if later, promise := t.later(k, absent, o.AtCommit); later {
		if t.failed != nil {
			return fmt.Errorf("postgres: transaction aborted by an earlier error: %w", t.failed)
		}
		t.know(k)
		// Judge expiry by the clock reading the Get used, so the row the
		// Get saw as expired is still replaceable; without such a Get,
		// by the clock at this call.
		if !absent {
			seen = t.s.opts.Now()
		}
		p := pending{sql: t.s.q.createOrFail, args: []any{k.Collection, k.StoredID(), b, exp, seen}, promise: promise}
		there := "22012" // the guard's division: a live document is there
		if promise && exp == nil {
			// A document there is most likely live, and one that
			// expired costs an attempt: the next one replaces it.
			p.sql, p.args, there = t.s.q.insert, p.args[:3], "23505"
		}
		p.scan = func(row pgx.Row) error {
			err := row.Scan()
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // written: the statement returns no row
			}
			if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == there {
				t.run.take(k)
				return fmt.Errorf("%w: %w: %w", backend.ErrConflict, errLiveDocument, err)
			}
			return err
		}
		t.queue = append(t.queue, p)
		return nil
	}
	t.know(k)
	created := false
	err = t.send(ctx, &pending{sql: t.s.q.create, args: []any{k.Collection, k.StoredID(), b, exp, t.s.opts.Now()},
		scan: func(row pgx.Row) error {
			var v int64
			err := row.Scan(&v)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			created = err == nil
			return err
		}})
	if err != nil {
		return err
	}
	if !created {
		return backend.ErrExists
	}
	return nil
}

func (t *tx) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	if t.failed != nil {
		return fmt.Errorf("postgres: transaction aborted by an earlier error: %w", t.failed)
	}
	t.know(k)
	// A Put has no condition and no result: it goes out with the next
	// statement or the commit.
	t.queue = append(t.queue, pending{sql: t.s.q.put, args: []any{k.Collection, k.StoredID(), b, expiry(opts)}})
	return nil
}

// written runs a conditional write returning the new version, and on no row
// tells ErrNotFound from ErrConflict.
func (t *tx) written(ctx context.Context, k backend.Key, p *pending) error {
	t.know(k)
	done := false
	p.scan = func(row pgx.Row) error {
		var v int64
		err := row.Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		done = err == nil
		return err
	}
	if err := t.send(ctx, p); err != nil {
		return err
	}
	if done {
		return nil
	}
	_, live, _, err := t.state(ctx, k, nil)
	if err != nil {
		return err
	}
	if !live {
		return backend.ErrNotFound
	}
	return backend.ErrConflict
}

func (t *tx) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	b, err := t.checkWrite(k, doc)
	if err != nil {
		return err
	}
	return t.written(ctx, k, &pending{sql: t.s.q.update, args: []any{k.Collection, k.StoredID(), b, expiry(opts), int64(v), t.s.opts.Now()}})
}

func (t *tx) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := t.gate.Check(k); err != nil {
		return err
	}
	return t.written(ctx, k, &pending{sql: t.s.q.delete, args: []any{k.Collection, k.StoredID(), int64(v), t.s.opts.Now()}})
}

// As hands out the transaction's native handle, so fn can write its own
// tables in the same transaction; what it writes commits or rolls back with
// this Tx. Do not Commit or Rollback through it: return from fn instead.
//
// With a *Querier target, As sets it to a handle that sends nothing yet: its
// first statement goes out together with BEGIN and any waiting writes (see
// Querier). With a *pgx.Tx target, As begins the transaction now (sending
// BEGIN and the waiting writes, a round trip if nothing was sent yet) and
// sets it to the pgx.Tx; statements sent through it see the Tx's writes made
// before As, and its Creates made after As, which then go out at once. If
// the transaction could not begin (the connection failed, BEGIN was
// refused) or an earlier statement aborted it, the pgx.Tx As sets fails
// every statement with that error, so the handler meets the reason. As
// reports false for other targets and after fn returned.
func (t *tx) As(target any) bool {
	if t.gate.Closed() {
		return false
	}
	switch p := target.(type) {
	case *Querier:
		if p == nil {
			return false
		}
		*p = querier{t: t}
		return true
	case *pgx.Tx:
		if p == nil {
			return false
		}
		if err := t.send(t.ctx, nil); err != nil {
			// The transaction could not begin, or is aborted: hand out a
			// pgx.Tx whose every statement fails with that error, so the
			// handler sees why (and Run returns it), not a bare false or
			// pgx's "tx is closed".
			*p = failedTx{err: err}
			return true
		}
		*p = nativeTx{Tx: t.ptx, t: t}
		t.native = true
		return true
	}
	return false
}

// take marks k taken: its Create, sent later, met a document.
func (r *runState) take(k backend.Key) {
	if r.taken == nil {
		r.taken = make(map[backend.Key]bool)
	}
	r.taken[k] = true
}

// promised reports whether a Create that fn was told succeeded waits to be
// sent.
func (t *tx) promised() bool {
	return slices.ContainsFunc(t.queue, func(p pending) bool { return p.promise })
}

// fnFailed returns what an attempt whose fn returned err returns. fn may
// have come to err believing a Create succeeded that was not sent: such a
// Create is sent first. If it, or a Create sent earlier in the attempt,
// met a document, the attempt fails as a lost race and fn runs again, told
// ErrExists this time; fn's error came of a Create that did not happen,
// and is not returned.
func (t *tx) fnFailed(ctx context.Context, err error) error {
	if t.failed == nil && t.promised() {
		_ = t.send(ctx, nil) // sets t.failed
	}
	if errors.Is(t.failed, errLiveDocument) {
		return fmt.Errorf("postgres: a Create sent later met a document: %w", t.failed)
	}
	return err
}

// commit sends the queued writes and COMMIT in one round trip.
func (t *tx) commit(ctx context.Context) error {
	if t.ptx == nil && len(t.queue) == 0 {
		return nil // fn sent nothing
	}
	if t.ptx != nil {
		switch t.conn.PgConn().TxStatus() {
		case 'T':
		case 'E':
			t.rollback(ctx)
			return errors.New("postgres: the transaction was aborted by a failed statement sent through the native handle")
		default:
			t.rollback(ctx)
			return errors.New("postgres: the transaction was ended through the native handle before Run could commit it")
		}
	}
	b, err := t.batch(ctx)
	var commit string
	if err == nil {
		commit, err = t.prepared(ctx, commitSQL)
	}
	if err != nil {
		// Nothing was sent: not committed.
		t.rollback(ctx)
		return fmt.Errorf("postgres: commit not sent: %w", mapErr(err))
	}
	if t.conn.IsClosed() {
		// The connection died before: nothing is sent (in the simple
		// protocol pgx would report this as it reports a lost reply).
		return errors.New("postgres: commit not sent: the connection is closed")
	}
	rolledBack := false
	b.Queue(commit).Exec(func(ct pgconn.CommandTag) error {
		rolledBack = ct.String() == "ROLLBACK"
		return nil
	})
	br := t.conn.SendBatch(ctx, b)
	if t.ptx == nil {
		t.ptx = br.Tx()
	}
	err = br.Close()
	if err == nil {
		if rolledBack {
			return errors.New("postgres: the transaction rolled back at commit")
		}
		return nil
	}
	var pe *pgconn.PgError
	var pre pgx.ErrPreprocessingBatch
	switch {
	case errors.As(err, &pe) && !fatal(pe):
		// The server refused a statement or the COMMIT itself and is
		// still talking to us: nothing committed.
		t.rollback(ctx)
		return mapErr(err)
	case errors.As(err, &pre), t.s.named && pgconn.SafeToRetry(err):
		// Only the pipelined batches of pgx's statement cache say
		// reliably that nothing was sent: in the other modes a reply lost
		// after the COMMIT went out can look safe to retry.
		t.rollback(ctx)
		return fmt.Errorf("postgres: commit not sent: %w", err)
	default:
		return fmt.Errorf("%w: postgres: connection failed during commit: %w", backend.ErrUnknownOutcome, err)
	}
}

// rollback ends the transaction without keeping anything. Errors are
// ignored: the pool closes a connection that is still in a transaction.
func (t *tx) rollback(ctx context.Context) {
	t.queue = nil
	if t.ptx == nil || t.conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "rollback")
}

// fatal reports whether the server ended the session with pe: then COMMIT's
// outcome is unknown. Severity is localised (lc_messages); the unlocalised
// one, sent by PostgreSQL 9.6 and later, is read first.
func fatal(pe *pgconn.PgError) bool {
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}
