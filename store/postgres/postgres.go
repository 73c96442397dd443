// Package postgres is an [idem.Store] on PostgreSQL (pgx v5), for teams that
// already keep their data there: op records commit in the same transaction as
// the change, and a handler reaches that transaction with As.
//
//	s, err := postgres.New(pool, nil)
//	if err != nil { ... }
//	if err := s.Migrate(ctx); err != nil { ... }
//	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		var q postgres.Querier
//		tx.As(&q) // the same transaction, for your own tables
//		if _, err := q.Exec(ctx, "UPDATE accounts SET ..."); err != nil {
//			return err
//		}
//		return tx.Create(ctx, idem.Key{Collection: "posts", ID: "p1"}, post)
//	})
//
// As hands out two handles. A [Querier] (the DBTX interface sqlc generates:
// pass it to your generated New) begins the transaction lazily: its first
// statement goes out together with BEGIN, in one round trip. A pgx.Tx is
// the full pgx interface, and As sends BEGIN first if nothing has yet.
//
// The Store is an [backend.Reader]: Read answers a replay with one SELECT
// outside any transaction. Creates and Puts go out with the next statement
// or the COMMIT, so a call that creates its documents and its op record
// costs one round trip; a Create is still told idem.ErrExists (see Run). A
// Create with [backend.CreateAtCommit] fails the attempt with
// idem.ErrConflict if a live document is there by the COMMIT.
//
// Documents live in one table, <prefix>idem_docs, with a jsonb document, a
// version and an expires_at column and a primary key on (collection, id).
// Transactions run at SERIALIZABLE isolation and are retried on
// serialization failures and deadlocks, and once on a unique violation.
// RunReadOnly's transactions run at REPEATABLE READ, READ ONLY: one
// snapshot, which waits for no writer. See docs/stores.md for the schema, the isolation
// choice and the pool.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// Options configure a Store. The zero value (or nil) means the defaults;
// New refuses a negative number, naming the field.
type Options struct {
	// TablePrefix is prepended to the names of the table, sequence and index
	// the store uses (<prefix>idem_docs, ...), so that several stores can
	// share a database or a schema. At most 32 bytes of [a-z0-9_], not
	// starting with a digit. Default "".
	TablePrefix string
	// Now is the store's clock, used to decide whether a document has
	// expired. Default time.Now.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts; larger
	// ones fail with idem.ErrTooLarge. Default 1 MiB.
	MaxDocumentBytes int
	// MaxAttempts bounds how many times Run calls fn when it keeps losing to
	// concurrent transactions. Default 32.
	MaxAttempts int
	// NoSweep turns off the background sweep of expired documents, which
	// New otherwise starts and Close stops, for a deployment that runs one
	// sweeping process of its own (docs/stores.md).
	NoSweep bool
	// SweepEvery is the longest the background sweep waits between two
	// rounds, when it finds little or nothing to delete. Default 1 minute.
	SweepEvery time.Duration
	// OnSweep, if set, is called after every round of the background
	// sweep with what it deleted and its error. Nil logs the rounds that
	// failed with slog.Default.
	OnSweep func(kit.SweepRound)
}

// Store is an idem.Store on a PostgreSQL database. It is safe for concurrent
// use. Create one with New and its schema with Migrate.
type Store struct {
	pool  *pgxpool.Pool
	opts  kit.Options
	retry kit.Retry
	q     queries
	// named: the pool caches prepared statements (pgx's default mode), so
	// the store's own statements are prepared by name (see tx.prepared).
	// Other modes (the simple protocol behind a transaction-pooling
	// PgBouncer, say) get the SQL itself, as before.
	named bool
	// direct: named, and the pool's connections have no tracer, so a read
	// may skip pgx's query path (read.go), which a tracer must see. Copying
	// a connection's config to ask cost 2% of a replay's CPU.
	direct bool
	// turns hands out the pool's connections to this Store's transactions
	// and reads by caller, round robin (backend.WithScope), so that they
	// wait here in turn and not in the pool's one line, where one caller's
	// many would stand all in front of another's.
	turns *kit.Turns

	// calls counts the transactions in progress (Run and RunReadOnly): a
	// sweep rests between batches while there are any.
	calls atomic.Int64

	// sweepFrom is the largest expiry the last sweep batch deleted, where
	// the next batch starts; sweepRest, until when the next batch waits
	// if calls are in progress.
	sweepMu   sync.Mutex
	sweepFrom pgtype.Timestamptz
	sweepRest time.Time

	background *kit.Sweeping // the background sweep; nil when off
}

var (
	_ backend.Store          = (*Store)(nil)
	_ backend.Reader         = (*Store)(nil)
	_ backend.ReadOnlyRunner = (*Store)(nil)
	_ backend.Sweeper        = (*Store)(nil)
	_ backend.Tx             = (*tx)(nil)
)

// New returns a Store that keeps its documents in pool's database; nil opts
// means the defaults. It does not touch the database: call Migrate before the
// first Run. It fails on a nil pool, a negative option or a malformed
// TablePrefix.
//
// Unless Options.NoSweep is set, New starts a background sweep of expired
// documents, whose first round comes a second later; a round before
// Migrate has made the table finds nothing to sweep, and is no failure. The
// Store does not own pool: call Close, which stops the sweep, before
// closing pool.
func New(pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("postgres: New needs a pool")
	}
	if opts == nil {
		opts = &Options{}
	}
	o, err := kit.Options{Now: opts.Now, MaxDocumentBytes: opts.MaxDocumentBytes, MaxAttempts: opts.MaxAttempts}.
		Resolve("postgres", kit.Options{Now: time.Now, MaxDocumentBytes: 1 << 20, MaxAttempts: 32})
	if err != nil {
		return nil, err
	}
	every, err := kit.Default("postgres", "SweepEvery", opts.SweepEvery, kit.SweepEvery)
	if err != nil {
		return nil, err
	}
	if err := validPrefix(opts.TablePrefix); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, opts: o, q: newQueries(opts.TablePrefix), sweepFrom: sweepStart,
		retry: kit.Retry{Store: "postgres", MaxAttempts: o.MaxAttempts, Base: 500 * time.Microsecond, Cap: 50 * time.Millisecond},
		named: pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement,
		turns: kit.NewTurns(int(pool.Config().MaxConns))}
	s.direct = s.named && pool.Config().ConnConfig.Tracer == nil
	s.background = kit.StartSweeping(s, (*Store).backgroundSweep,
		kit.SweepOptions{Store: "postgresql", Off: opts.NoSweep, Every: every, Report: opts.OnSweep})
	return s, nil
}

// Close stops the background sweep and waits for a round in progress to
// end (it is cancelled). It does not close the pool, which the Store does
// not own, and releases nothing else: Run, Read and Sweep go on working
// until the pool is closed. Close the Store before the pool: a sweep round
// on a closed pool fails, and is reported (Options.OnSweep), until the
// Store is closed or garbage collected. It always returns nil.
func (s *Store) Close() error {
	s.background.Stop()
	return nil
}

func validPrefix(p string) error {
	if len(p) > 32 {
		return errors.New("postgres: TablePrefix may be at most 32 bytes")
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || c >= '0' && c <= '9' && i > 0) {
			return errors.New("postgres: TablePrefix may hold only [a-z0-9_] and may not start with a digit")
		}
	}
	return nil
}

// Table returns the (quoted) name of the table the store keeps its documents
// in, for queries of your own and for dropping it.
func (s *Store) Table() string { return s.q.table }

// Migrate creates the store's table, version sequence and expiry index if
// they do not exist. It is safe to call on every start and from several
// processes at once.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog;
	// a transaction-scoped advisory lock makes migrations take turns.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('idemkit.migrate'))"); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	for _, stmt := range s.q.schema {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// Run implements idem.Store. fn runs in one SERIALIZABLE transaction on one
// pooled connection; Run commits when fn returns nil.
//
// Run calls fn again, up to Options.MaxAttempts times with jittered backoff,
// when the attempt fails with a serialization failure (SQLSTATE 40001), a
// deadlock (40P01) or an error wrapping idem.ErrConflict; after the last
// attempt it returns an error wrapping idem.ErrConflict and the last native
// error. A unique violation (23505) is retried once, which settles a create
// race in your own tables (the next attempt reads the winner's row); a
// second one is returned as it is, not as a conflict: no concurrent writer
// caused it.
//
// A Create returns at once and goes out later, with fn's next statement or
// the COMMIT, unless this transaction wrote the key or found it live, or fn
// holds the native pgx.Tx (see As). If it meets a live document, the attempt
// fails and Run calls fn again at once; this time that Create goes out at
// once and returns idem.ErrExists. If fn returns an error while such a
// Create waits, Run sends it first, and calls fn again if it meets a live
// document. So fn is told ErrExists as if every Create went out at once;
// telling it costs one more attempt.
//
// Once fn has returned nil the commit is not cancelled with ctx. If the
// connection fails while the commit is in flight, Run returns an error
// wrapping idem.ErrUnknownOutcome: the transaction may or may not have
// committed. If fn panics, the transaction is rolled back and the panic
// continues.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	if fn == nil {
		return errors.New("postgres: Run needs a function")
	}
	return s.run(ctx, beginSQL, fn)
}

// RunReadOnly implements [backend.ReadOnlyRunner]. fn runs in one
// REPEATABLE READ, READ ONLY transaction on one pooled connection: it reads
// the snapshot its first statement takes, waits for no lock, and cannot
// fail for a concurrent transaction (a SERIALIZABLE READ ONLY one could,
// unless DEFERRABLE, which may wait for a snapshot instead). Its writes
// through tx fail with an error wrapping idem.ErrReadOnly before anything
// is sent; a write through the handles As hands out is refused by the
// server (SQLSTATE 25006), which aborts the transaction. It commits when fn
// returns nil; as with Run, fn runs again on an error wrapping
// idem.ErrConflict, and a panic rolls back and goes on.
func (s *Store) RunReadOnly(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	if fn == nil {
		return errors.New("postgres: RunReadOnly needs a function")
	}
	return s.run(ctx, beginReadOnlySQL, kit.ReadOnly(fn))
}

// run is Run and RunReadOnly: fn in a transaction that begin begins.
func (s *Store) run(ctx context.Context, begin string, fn func(ctx context.Context, tx backend.Tx) error) error {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	failed, uniques := 0, 0 // attempts failed, unique violations met
	r := &runState{}
	err := s.retry.Do(ctx, func() error { return s.attempt(ctx, r, begin, fn) }, func(err error) kit.Next {
		failed++
		if !retryable(err) {
			return kit.Stop
		}
		if uniqueViolation(err) != nil && !errors.Is(err, errLiveDocument) {
			// A create race in fn's own tables is settled by one more
			// attempt, which reads the winner's row. A violation that
			// comes back was not a race (an email already taken): it is
			// fn's caller's to see, not a conflict to wait out.
			if uniques++; uniques > 1 {
				return kit.Stop
			}
		}
		if failed == 1 && errors.Is(err, errLiveDocument) {
			// A Create at commit found a live document: the retry reads
			// it, and meets no contention.
			return kit.AgainNow
		}
		return kit.Again
	})
	if uniques > 1 && errors.Is(err, backend.ErrConflict) {
		// The unique violation that came back, as it is.
		return fmt.Errorf("postgres: %w", uniqueViolation(err))
	}
	return poolerHint(err)
}

// acquire takes a connection of the pool in the turn of ctx's scope (see
// Store.turns); release gives both back. Release closes the connection
// instead of pooling it if it is still in a transaction, so a failed
// rollback leaks nothing.
func (s *Store) acquire(ctx context.Context) (c *pgxpool.Conn, release func(), err error) {
	if err := s.turns.Acquire(ctx, nil, 0); err != nil {
		return nil, nil, fmt.Errorf("postgres: waiting for a connection: %w", err)
	}
	if c, err = s.pool.Acquire(ctx); err != nil {
		s.turns.Release()
		return nil, nil, fmt.Errorf("postgres: acquiring a connection: %w", err)
	}
	return c, func() { c.Release(); s.turns.Release() }, nil
}

func (s *Store) attempt(ctx context.Context, r *runState, begin string, fn func(ctx context.Context, tx backend.Tx) error) error {
	c, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	t, err := s.attemptOn(ctx, c.Conn(), r, begin, fn)
	// The error fn returned may hide the statement error (a closed
	// pgx.Tx after a failed BEGIN): t.failed has it.
	if s.forgetStale(ctx, c.Conn(), err, t.failed) {
		// Once more, on this connection, which prepares them again.
		_, err = s.attemptOn(ctx, c.Conn(), r, begin, fn)
	}
	return err
}

// attemptOn runs fn in one transaction on conn and commits it, or rolls it
// back; conn is idle again when it returns.
func (s *Store) attemptOn(ctx context.Context, conn *pgx.Conn, r *runState, begin string, fn func(ctx context.Context, tx backend.Tx) error) (t *tx, err error) {
	t = &tx{s: s, ctx: ctx, conn: conn, begin: begin, absent: make(map[backend.Key]time.Time), run: r}
	defer func() {
		if r := recover(); r != nil {
			t.gate.Close()
			t.rollback(ctx)
			panic(r)
		}
	}()
	err = fn(ctx, t)
	t.gate.Close()
	if err != nil {
		err = t.fnFailed(ctx, err)
		t.rollback(ctx)
		return t, err
	}
	if t.failed != nil {
		// fn went on after a statement failed, which aborted the
		// transaction: nothing it wrote can commit.
		t.rollback(ctx)
		return t, fmt.Errorf("postgres: a statement in the transaction failed: %w", t.failed)
	}
	return t, t.commit(context.WithoutCancel(ctx))
}

// sweepBatch is the most rows one sweep statement deletes.
const sweepBatch = 100

// Sweep deletes up to limit documents whose expiry is not after the store's
// clock, in batches of at most 100 rows, each its own short statement that
// skips rows other transactions hold locked. It returns how many it deleted;
// fewer than limit means no unlocked expired document was left. limit must
// be positive.
//
// Each batch goes on from the largest expiry the previous one deleted, in
// this call or an earlier one, so that a long sweep never walks the index
// entries of the rows it deleted again; before it returns fewer than limit,
// Sweep looks once more from the earliest expiry, for documents that were
// locked then or expire at an earlier time than that position. Its statement
// is planned for each batch's values (never a generic plan).
//
// While Runs of this Store are in progress, each batch waits until the
// sweep has rested as long as its previous batch took, so that calls do not
// queue behind batch after batch for the server; a sweep alone goes at full
// speed. Calls of other processes are not seen.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, errors.New("postgres: Sweep limit must be positive")
	}
	now := s.opts.Now()
	s.sweepMu.Lock()
	from := s.sweepFrom
	s.sweepMu.Unlock()
	fromStart := from == sweepStart
	total := 0
	for total < limit {
		if err := s.sweepWait(ctx); err != nil {
			return total, err
		}
		n := min(sweepBatch, limit-total)
		b0 := time.Now()
		var deleted int64
		var last pgtype.Timestamptz
		args := []any{now, from, n}
		if s.named {
			// An unnamed statement is planned with its values; a cached
			// one would go generic after five runs, and the generic plan
			// of this statement cannot use the index bounds.
			args = append([]any{pgx.QueryExecModeExec}, args...)
		}
		if err := s.pool.QueryRow(ctx, s.q.sweep, args...).Scan(&deleted, &last); err != nil {
			return total, fmt.Errorf("postgres: sweep: %w", err)
		}
		total += int(deleted)
		took := time.Since(b0)
		s.sweepMu.Lock()
		if deleted > 0 {
			from = last
			s.sweepFrom = last
		}
		s.sweepRest = time.Now().Add(took)
		s.sweepMu.Unlock()
		if int(deleted) < n {
			if fromStart {
				break
			}
			from, fromStart = sweepStart, true
		}
	}
	return total, nil
}

// backgroundSweep is Sweep for the background rounds. Before Migrate has
// made the table (a deployment that opens the store and migrates in a
// step of its own, which may take longer than the first round's second) a
// round finds nothing to sweep instead of failing; a call's Run fails on
// the missing table, and so does a Sweep called directly.
func (s *Store) backgroundSweep(ctx context.Context, limit int) (int, error) {
	n, err := s.Sweep(ctx, limit)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return n, nil
	}
	return n, err
}

// sweepWait waits, while Runs of this store are in progress, until the
// sweep has rested as long as its last batch took: a sweep takes at most
// about half of the time while calls come, so that they do not queue behind
// batch after batch for the server's CPU and disk; alone it goes at full
// speed.
func (s *Store) sweepWait(ctx context.Context) error {
	s.sweepMu.Lock()
	until := s.sweepRest
	s.sweepMu.Unlock()
	d := time.Until(until)
	if d <= 0 || s.calls.Load() == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sweepStart is the expiry a sweep starts from when it knows no later one.
var sweepStart = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
