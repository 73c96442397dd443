// Package sqlite is an [idem.Store] in one SQLite database file: the
// embedded, durable default. It uses modernc.org/sqlite, so it needs no cgo.
//
//	s, err := sqlite.Open("idem.db", nil)
//	if err != nil { ... }
//	defer s.Close()
//	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		return tx.Create(ctx, idem.Key{Collection: "posts", ID: "p1"}, post)
//	})
//
// Documents live in one table, created by Open:
//
//	docs(collection TEXT, id TEXT, version INTEGER, doc TEXT, expires_at INTEGER NULL,
//	     PRIMARY KEY(collection, id))
//
// where doc is the JSON document and expires_at is Unix nanoseconds (NULL:
// never). A one-row table docs_seq holds the last version handed out, so
// versions never repeat, not even after a delete.
//
// Every Run is one write transaction, BEGIN IMMEDIATE on a connection of its
// own, in WAL mode with synchronous=FULL: transactions run one at a time
// (within a process they queue in Go; across processes SQLite's lock and busy
// timeout order them), so fn never loses a race, and a committed transaction
// survives a crash or power loss. RunReadOnly is a read transaction on
// another connection, which in WAL mode reads one snapshot while the writer
// goes on: it never waits for a Run.
//
// A server can keep its own tables in the same database and write them in
// the same transaction as the documents: inside fn,
//
//	var conn *sql.Conn
//	tx.As(&conn) // true
//	_, err := conn.ExecContext(ctx, "INSERT INTO posts ...")
//
// Statements on conn commit or roll back with the Run. Use conn only inside
// fn and never run BEGIN, COMMIT or ROLLBACK on it. If SQLite ends the
// transaction by itself (a statement interrupted by its context, an I/O or
// full-disk error), every later statement of the Run, on conn or through the
// Tx, is refused, and Run returns an error: nothing of it is kept.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// Options configure a Store. Nil, or a zero field, means the default;
// Open refuses a negative number, naming the field.
type Options struct {
	// Now is the store's clock, used to decide whether a document has
	// expired. Default time.Now.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts; larger
	// ones fail with idem.ErrTooLarge. Default 1 MiB.
	MaxDocumentBytes int
	// BusyTimeout is how long a Run waits for the database while another
	// process (or another Store on the same file) holds it; then Run counts
	// the attempt as lost and tries again, up to MaxAttempts. This Store's
	// own Runs queue in order for as long as their context allows, and at
	// most a minute. Close waits this long for a Run in progress. Default
	// 5 s.
	BusyTimeout time.Duration
	// MaxAttempts bounds how many times Run calls fn when fn returns an
	// error wrapping idem.ErrConflict or the database stays busy. Default 16.
	MaxAttempts int
	// NoSweep turns off the background sweep of expired documents, which
	// Open otherwise starts and Close stops, for a deployment that runs one
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

// Store is an idem.Store in a SQLite database file. It is safe for
// concurrent use; create it with Open and release it with Close.
type Store struct {
	db    *sql.DB
	opts  kit.Options
	retry kit.Retry
	busy  time.Duration
	// writer holds one token while a Run or Sweep of this Store uses the
	// database, so that this process's transactions queue in Go instead of
	// polling SQLite's lock, taking turns by scope.
	writer *kit.Turns
	// done is closed by Close: Runs waiting for the writer token give up.
	done    chan struct{}
	closing atomic.Bool
	// gaveUp is set when Close stopped waiting for a Run still in fn:
	// that Run must not commit.
	gaveUp atomic.Bool
	// w is the connection Runs write on, kept from one Run to the next
	// with the statements prepared on it (compiling a statement costs
	// about as much as running it); nil until a Run needs one. Guarded
	// by the writer token.
	w *keptConn
	// reader is readQuery prepared for Read, on every pooled connection
	// it runs on.
	reader *sql.Stmt
	// rdb opens the connections RunReadOnly reads on: each is query_only,
	// so that nothing is written through it, not even through As.
	rdb *sql.DB
	// readMu guards readers, the idle read connections kept with their
	// statements (at most maxIdleReaders), and readClosed, set by Close.
	readMu     sync.Mutex
	readers    []*keptConn
	readClosed bool
	// waiting counts the Runs waiting for the writer token: a sweep
	// batch that got the token while Runs wait lets them go first.
	waiting atomic.Int32
	// sweeping is held by a Sweep call, its batches and checkpoints included.
	sweeping sync.Mutex
	// Guarded by sweeping: how many documents sweeps deleted since they
	// last checkpointed, and how many they delete before the next
	// checkpoint.
	uncheckpointed int
	checkpointAt   int

	background *kit.Sweeping // the background sweep; nil when off
}

var (
	_ backend.Store          = (*Store)(nil)
	_ backend.Reader         = (*Store)(nil)
	_ backend.ReadOnlyRunner = (*Store)(nil)
	_ backend.Sweeper        = (*Store)(nil)
	_ backend.Tx             = (*tx)(nil)
)

// keptConn is a connection kept from one transaction to the next (the
// writer, or an idle read connection) with the statements prepared on it.
type keptConn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	bad   bool // discarded: not kept after this Run
}

// writeConn returns the connection this Run writes on.
func (s *Store) writeConn(ctx context.Context) (*keptConn, error) {
	if s.w == nil {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		s.w = &keptConn{conn: conn, stmts: make(map[string]*sql.Stmt)}
	}
	return s.w, nil
}

// releaseConn ends a Run's use of the connection: it is kept for the next
// Run unless it was discarded or the store is closing.
func (s *Store) releaseConn(w *keptConn) {
	if w.bad || s.closing.Load() {
		w.close()
		if s.w == w {
			s.w = nil
		}
	}
}

func (w *keptConn) close() {
	if !w.bad {
		// A discarded connection's statements went with it: database/sql
		// closed them, and closing them again would fail in the driver.
		for _, st := range w.stmts {
			st.Close()
		}
	}
	w.conn.Close()
}

// stmt returns query prepared on w.
func (w *keptConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

// rollback ends the transaction on w; if it cannot, the connection is
// discarded so that no later Run inherits the open transaction.
func (w *keptConn) rollback() {
	if _, err := w.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		w.discard()
	}
}

// discard makes database/sql close the connection instead of reusing it.
func (w *keptConn) discard() {
	w.bad = true
	discard(w.conn)
}

// inRun keys the context fn gets; its value, a *runState, is active while
// that Run holds the writer token, so a Run of the same Store called from
// inside fn fails at once instead of waiting for itself. Contexts that
// outlive the Run (a hook, a background goroutine) are not refused.
type inRun struct{ s *Store }

type runState struct{ active atomic.Bool }

// queueWait bounds how long a Run waits for this Store's other
// transactions: long enough for any honest queue, short enough that a fn
// waiting for a Run of its own store (with an unrelated context) fails
// instead of hanging every later Run.
const queueWait = time.Minute

var errClosedStore = errors.New("sqlite: store closed")

const schema = `
CREATE TABLE IF NOT EXISTS docs (
	collection TEXT NOT NULL,
	id         TEXT NOT NULL,
	version    INTEGER NOT NULL,
	doc        TEXT NOT NULL,
	expires_at INTEGER,
	PRIMARY KEY (collection, id)
);
CREATE INDEX IF NOT EXISTS docs_expires_at ON docs (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS docs_seq (
	one  INTEGER PRIMARY KEY CHECK (one = 1),
	last INTEGER NOT NULL
);
INSERT INTO docs_seq (one, last) VALUES (1, 0) ON CONFLICT (one) DO NOTHING;
`

// Open opens (creating if need be) the SQLite database file at path and
// the docs table in it. path is a file name, not a URI; nil opts means the
// defaults. The returned Store holds the file open until Close.
func Open(path string, opts *Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.HasPrefix(path, "file:") || path == ":memory:" || strings.ContainsRune(path, 0) {
		return nil, errors.New("sqlite: path must name a database file")
	}
	if opts == nil {
		opts = &Options{}
	}
	o, err := kit.Options{Now: opts.Now, MaxDocumentBytes: opts.MaxDocumentBytes, MaxAttempts: opts.MaxAttempts}.
		Resolve("sqlite", kit.Options{Now: time.Now, MaxDocumentBytes: 1 << 20, MaxAttempts: 16})
	if err != nil {
		return nil, err
	}
	busy, err := kit.Default("sqlite", "BusyTimeout", opts.BusyTimeout, 5*time.Second)
	if err != nil {
		return nil, err
	}
	every, err := kit.Default("sqlite", "SweepEvery", opts.SweepEvery, kit.SweepEvery)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:         o,
		retry:        kit.Retry{Store: "sqlite", MaxAttempts: o.MaxAttempts, Base: 100 * time.Microsecond, Cap: 20 * time.Millisecond},
		busy:         busy,
		checkpointAt: firstCheckpoint,
		writer:       kit.NewTurns(1),
		done:         make(chan struct{}),
	}
	db, err := sql.Open("sqlite", dsn(path, s.busy))
	if err != nil {
		return nil, fmt.Errorf("sqlite: opening database: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.busy+5*time.Second)
	defer cancel()
	// A file already set up needs only a read (no write lock), so a
	// process can open it while another holds a long transaction.
	// (PRAGMA user_version is the application's, not ours: the tables
	// themselves say whether the file is set up.)
	var one int
	if err := db.QueryRowContext(ctx, `SELECT one FROM docs_seq WHERE one = 1`).Scan(&one); err != nil {
		if _, err := db.ExecContext(ctx, schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: creating tables: %w", err)
		}
	}
	if s.reader, err = db.PrepareContext(ctx, readQuery); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: preparing a statement: %w", err)
	}
	s.db = db
	// Read connections are opened as they are needed, by RunReadOnly.
	if s.rdb, err = sql.Open("sqlite", dsn(path, s.busy)+readOnlyDSN); err != nil {
		s.reader.Close()
		db.Close()
		return nil, fmt.Errorf("sqlite: opening database: %w", err)
	}
	s.background = kit.StartSweeping(s, (*Store).Sweep,
		kit.SweepOptions{Store: "sqlite", Off: opts.NoSweep, Every: every, Report: opts.OnSweep})
	return s, nil
}

// dsn makes a modernc.org/sqlite data source name for the file at path.
// The path goes in a file: URI, escaped so that '?', '#' and '%' in it stay
// part of the name.
func dsn(path string, busy time.Duration) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	u := "file:" + r.Replace(path)
	if strings.HasPrefix(path, "/") {
		u = "file://" + r.Replace(path)
	}
	ms := strconv.FormatInt(max(busy.Milliseconds(), 1), 10)
	return u + "?_pragma=busy_timeout(" + ms + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
}

// readOnlyDSN is added to dsn's name for the read connections: PRAGMA
// query_only, which the driver sets last, after the pragmas that may write.
const readOnlyDSN = "&_query_only=1"

// Close stops the background sweep (cancelling a round in progress and
// waiting for it), makes waiting and later Runs fail, waits (at most the
// busy timeout) for the Run or Sweep in progress to finish, and closes the
// database. A Run still in fn after that does not commit, and Close returns
// an error saying so. Later RunReadOnly calls fail; one in progress reads on
// to its end, and its connection is closed then. Close must not be called
// from inside fn.
func (s *Store) Close() error {
	if !s.closing.CompareAndSwap(false, true) {
		return errClosedStore
	}
	s.background.Stop()
	close(s.done)
	var stuck error
	if s.writer.Acquire(context.Background(), nil, s.busy) == nil { // held for good: nothing runs after Close
		if s.w != nil {
			s.w.close()
			s.w = nil
		}
	} else {
		// A Run stuck in fn: it will not commit (runOnce checks closing
		// before COMMIT), and Close says so.
		s.gaveUp.Store(true)
		stuck = errors.New("sqlite: closed while a Run was still in fn; it will be rolled back")
	}
	s.closeReaders()
	s.reader.Close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlite: closing database: %w", err)
	}
	return stuck
}

// lock waits for this Store's writer token: this process's transactions
// queue here (each holds the token for one transaction only), taking turns
// by the scope of ctx (backend.WithScope), for as long as ctx allows and at
// most queueWait. A Run called from inside fn would wait for itself: it
// fails at once.
func (s *Store) lock(ctx context.Context) error {
	if st, ok := ctx.Value(inRun{s}).(*runState); ok && st.active.Load() {
		return errors.New("sqlite: Run called from inside fn of the same store (it would wait for itself)")
	}
	select {
	case <-s.done:
		return errClosedStore
	default:
	}
	switch err := s.writer.Acquire(ctx, s.done, queueWait); {
	case errors.Is(err, kit.ErrTurnStopped):
		return errClosedStore
	case errors.Is(err, kit.ErrTurnTimeout):
		return errors.New("sqlite: waited a minute for this store's other transactions (is fn waiting for a Run of the same store?)")
	case err != nil:
		return err
	}
	select {
	case <-s.done: // Close came first
		s.writer.Release()
		return errClosedStore
	default:
	}
	return nil
}

func (s *Store) unlock() { s.writer.Release() }

// Run implements [idem.Store]. fn runs inside one BEGIN IMMEDIATE
// transaction, which commits when fn returns nil and rolls back otherwise; a
// panic in fn rolls back and goes on panicking. Run calls fn again, up to
// Options.MaxAttempts times in all, when fn returns an error wrapping
// idem.ErrConflict or when the database stays locked by another process
// for the busy timeout; the error after the last attempt wraps
// idem.ErrConflict.
//
// A COMMIT that fails with SQLITE_BUSY has left the transaction open, so Run
// rolls it back and tries again. A COMMIT that fails any other way (an I/O
// error, a full disk) may or may not have reached the file, so Run returns an
// error wrapping both idem.ErrUnknownOutcome and the *sqlite.Error, and
// discards the connection. The COMMIT ignores ctx's cancellation, so that a
// cancelled request does not turn a commit into an unknown outcome.
//
// Run must not be called from inside fn on the same Store: it would wait for
// the transaction fn is in. Called with fn's context it fails at once; with
// another context it fails after a minute of waiting.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	return s.retry.Do(ctx, func() error { return s.runOnce(ctx, fn) }, kit.OnConflict)
}

func (s *Store) runOnce(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) (err error) {
	s.waiting.Add(1)
	err = s.lock(ctx)
	s.waiting.Add(-1)
	if err != nil {
		return err
	}
	defer s.unlock()
	w, err := s.writeConn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: getting a connection: %w", err)
	}
	defer s.releaseConn(w)
	conn := w.conn
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		if isBusy(err) {
			return fmt.Errorf("%w: database locked: %w", backend.ErrConflict, err)
		}
		return fmt.Errorf("sqlite: beginning transaction: %w", err)
	}
	t := &tx{s: s, conn: conn, w: w}
	if err := t.guard(); err != nil {
		t.unguard()
		w.rollback()
		return err
	}
	done := false
	defer func() {
		t.gate.Close()
		if !done {
			// fn panicked (or called runtime.Goexit): undo it and let the
			// panic go on.
			w.rollback()
		}
		t.unguard()
	}()
	st := &runState{}
	st.active.Store(true)
	defer st.active.Store(false)
	fnErr := fn(context.WithValue(ctx, inRun{s}, st), t)
	t.gate.Close()
	done = true
	if fnErr != nil {
		w.rollback()
		return fnErr
	}
	if t.rolledBack.Load() {
		// fn went on after SQLite ended the transaction: nothing of it
		// is committed, and no COMMIT is sent.
		return errRolledBack
	}
	if s.gaveUp.Load() {
		w.rollback()
		return errClosedStore
	}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		if isBusy(err) {
			w.rollback()
			return fmt.Errorf("%w: database locked at commit: %w", backend.ErrConflict, err)
		}
		if t.rolledBack.Load() {
			return fmt.Errorf("%w: %w", errRolledBack, err)
		}
		w.discard()
		return fmt.Errorf("%w: sqlite commit failed: %w", backend.ErrUnknownOutcome, err)
	}
	return nil
}

// RunReadOnly implements [backend.ReadOnlyRunner]. fn runs inside a
// deferred BEGIN on a read connection, not the writer: in WAL mode its first
// read takes a snapshot of the committed database, which it reads until fn
// returns, while Runs go on writing and committing. It never waits for this
// Store's writer nor another process's. Its writes through tx fail with an
// error wrapping idem.ErrReadOnly, and the connection As hands out is
// read-only (PRAGMA query_only). The transaction is rolled back when fn
// returns: it has nothing to keep. A panic in fn rolls back and goes on
// panicking.
//
// A few read connections are kept open between calls, with their
// statements; more are opened while more RunReadOnly calls run at once.
func (s *Store) RunReadOnly(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	fn = kit.ReadOnly(fn)
	return s.retry.Do(ctx, func() error { return s.readOnce(ctx, fn) }, kit.OnConflict)
}

// maxIdleReaders is how many idle read connections a Store keeps.
const maxIdleReaders = 4

func (s *Store) readOnce(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	c, err := s.readConn(ctx)
	if err != nil {
		return err
	}
	defer s.releaseReadConn(c)
	if _, err := c.conn.ExecContext(ctx, "BEGIN"); err != nil {
		c.discard()
		return fmt.Errorf("sqlite: beginning a read transaction: %w", err)
	}
	// No guard (see runOnce): nothing written on a query_only connection
	// can be kept, and an interrupted read does not end the transaction.
	t := &tx{s: s, conn: c.conn, w: c}
	defer func() {
		// Also when fn panicked (or called runtime.Goexit).
		t.gate.Close()
		c.rollback()
	}()
	return fn(ctx, t)
}

// readConn returns an idle read connection, or opens one.
func (s *Store) readConn(ctx context.Context) (*keptConn, error) {
	s.readMu.Lock()
	if s.readClosed {
		s.readMu.Unlock()
		return nil, errClosedStore
	}
	if n := len(s.readers); n > 0 {
		c := s.readers[n-1]
		s.readers[n-1] = nil
		s.readers = s.readers[:n-1]
		s.readMu.Unlock()
		return c, nil
	}
	s.readMu.Unlock()
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: getting a read connection: %w", err)
	}
	return &keptConn{conn: conn, stmts: make(map[string]*sql.Stmt)}, nil
}

// releaseReadConn keeps c for the next RunReadOnly, unless it was
// discarded, enough are kept, or the store is closed.
func (s *Store) releaseReadConn(c *keptConn) {
	if !c.bad {
		s.readMu.Lock()
		if !s.readClosed && len(s.readers) < maxIdleReaders {
			s.readers = append(s.readers, c)
			s.readMu.Unlock()
			return
		}
		s.readMu.Unlock()
	}
	c.close()
}

// closeReaders closes the idle read connections and the read database;
// those in use are closed when released.
func (s *Store) closeReaders() {
	s.readMu.Lock()
	s.readClosed = true
	idle := s.readers
	s.readers = nil
	s.readMu.Unlock()
	for _, c := range idle {
		c.close()
	}
	s.rdb.Close()
}

// guard watches for SQLite ending the transaction by itself (an interrupted
// statement, an I/O or full-disk error): a rollback hook marks the tx, and an
// authorizer then refuses to compile any further statement on the
// connection, the store's and those fn sends through As alike, so none of
// them runs in autocommit mode and is kept on its own. Statements that end
// transactions stay allowed, for the store's own ROLLBACK.
func (t *tx) guard() error {
	return t.conn.Raw(func(dc any) error {
		h, ok := dc.(sqlite.HookRegisterer)
		a, ok2 := dc.(sqlite.AuthorizerRegisterer)
		if !ok || !ok2 {
			return fmt.Errorf("sqlite: driver connection %T cannot report rollbacks", dc)
		}
		h.RegisterRollbackHook(func() { t.rolledBack.Store(true) })
		return a.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
			if t.rolledBack.Load() && action != sqlite.AuthTransaction {
				return sqlite.AuthorizerDeny
			}
			return sqlite.AuthorizerOK
		})
	})
}

// unguard removes what guard installed, before the connection goes back to
// the pool.
func (t *tx) unguard() {
	_ = t.conn.Raw(func(dc any) error {
		if h, ok := dc.(sqlite.HookRegisterer); ok {
			h.RegisterRollbackHook(nil)
		}
		if a, ok := dc.(sqlite.AuthorizerRegisterer); ok {
			return a.RegisterAuthorizer(nil)
		}
		return nil
	})
}

// discard makes database/sql close conn instead of reusing it.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// Read implements [backend.Reader]: one SELECT outside any transaction, which
// in WAL mode neither waits for nor blocks the writer. The middleware uses it
// to answer replays without taking the write lock.
func (s *Store) Read(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	return scanDoc(s.reader.QueryRowContext(ctx, k.Collection, k.StoredID()), unixNano(s.opts.Now()), dst)
}

// sweepBatch is the most documents one sweep transaction deletes: about
// 1-2 ms of this Store's writer at 1M documents on a small machine
// (docs/stores.md).
const sweepBatch = 16

// A sweep checkpoints when it has written about walTarget pages to the WAL
// since its last checkpoint: under the 1,000 pages (autocheckpoint) at which
// a Run's commit would checkpoint, with room for the Runs' own pages. It
// counts documents, not pages: firstCheckpoint documents at first (a few
// hundred pages at 1M documents), then as many as filled walTarget pages at
// the rate its last checkpoint found (docs/stores.md).
const (
	walTarget       = 800
	firstCheckpoint = 128
)

// autocheckpoint is SQLite's default wal_autocheckpoint, in pages: Runs'
// commits checkpoint when the WAL has grown past it.
const autocheckpoint = 1000

// Sweep implements [backend.Sweeper]: it deletes up to limit documents whose
// expiry is not after the store's clock and returns how many it deleted;
// fewer than limit means no expired document was left. limit must be
// positive.
//
// It deletes in batches of at most 16 documents, each its own transaction
// that holds this Store's writer only for that batch. Runs waiting for the
// writer go before the next batch, up to 4 of them (so that under a steady
// stream of Runs a sweep still deletes about 4 documents a Run): a long
// sweep delays a Run by at most the one batch in progress, not by the
// whole sweep. Its commits do not checkpoint the WAL; the sweep checkpoints
// itself, without holding the writer, after about 800 pages of WAL and
// when it is done, so that Runs' commits rarely have a checkpoint to run;
// a sweep alone keeps the WAL under SQLite's 1,000-page checkpoint size.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, errors.New("sqlite: sweep limit must be positive")
	}
	now := unixNano(s.opts.Now())
	// One sweep at a time: the checkpoint counters are the sweeps'.
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	conn, err := sweepConn(ctx, s.db)
	if err != nil {
		return 0, err
	}
	defer releaseSweepConn(ctx, conn)
	total := 0
	for total < limit {
		n := min(sweepBatch, limit-total)
		deleted, err := s.sweepOnce(ctx, conn, now, n)
		total += deleted
		if err != nil {
			return total, err
		}
		if deleted < n {
			break
		}
	}
	return total, nil
}

// sweepConn returns a pooled connection set up for a sweep's batches.
// A deletion of expired documents need not survive a crash (they are
// absent either way, and the next sweep deletes them again), so its commits
// do not wait for fsync; a later commit's fsync or the sweep's checkpoint
// covers them. Nor do they checkpoint: the sweep does, without holding the
// writer.
func sweepConn(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: getting a connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0"); err != nil {
		discard(conn)
		conn.Close()
		return nil, fmt.Errorf("sqlite: sweeping expired documents: %w", err)
	}
	return conn, nil
}

// releaseSweepConn gives the pool back a connection of sweepConn's with
// the settings every other connection has, or discards it.
func releaseSweepConn(ctx context.Context, conn *sql.Conn) {
	restore := "PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=" + strconv.Itoa(autocheckpoint)
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), restore); err != nil {
		discard(conn)
	}
	conn.Close()
}

// sweepOnce deletes up to n documents expired at now in one transaction on
// conn (from sweepConn, the caller holding s.sweeping), and checkpoints
// when it is time to.
func (s *Store) sweepOnce(ctx context.Context, conn *sql.Conn, now int64, n int) (int, error) {
	if err := s.lockAfterRuns(ctx); err != nil {
		return 0, err
	}
	deleted, err := deleteExpired(ctx, conn, now, n)
	// Unlocking hands the writer to a Run waiting for it, if any.
	s.unlock()
	if err != nil {
		return 0, err
	}
	s.uncheckpointed += deleted
	due := s.uncheckpointed >= s.checkpointAt
	if due || deleted < n {
		// PASSIVE: copies what it can without waiting for readers or
		// the writer; Runs go on committing meanwhile.
		var busy, frames, copied int
		if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
			return deleted, fmt.Errorf("sqlite: checkpointing after a sweep: %w", err)
		}
		if due && frames > 0 {
			s.checkpointAt = min(max(walTarget*s.uncheckpointed/frames, sweepBatch), 64*sweepBatch)
		}
		s.uncheckpointed = 0
	}
	return deleted, nil
}

// maxYields bounds how many times in a row a sweep batch lets waiting Runs
// go first, so that a steady stream of Runs cannot stop a sweep: with one
// Run let through a yield, a sweep deletes about 16/4 = 4 documents a Run,
// more than the op records calls write (docs/stores.md).
const maxYields = 4

// lockAfterRuns takes the writer token for a sweep batch, letting Runs that
// wait for it go first: a Run that arrived while the sweep waited for the
// token does not wait for a batch too.
func (s *Store) lockAfterRuns(ctx context.Context) error {
	for range maxYields {
		if err := s.lock(ctx); err != nil {
			return err
		}
		if s.waiting.Load() == 0 {
			return nil
		}
		// Unlocking hands the token to the first waiting Run; locking
		// again queues behind it.
		s.unlock()
	}
	return s.lock(ctx)
}

// deleteExpired deletes up to n documents expired at now in one transaction
// on conn (from sweepConn), which must hold this Store's writer.
func deleteExpired(ctx context.Context, conn *sql.Conn, now int64, n int) (int, error) {
	res, err := conn.ExecContext(ctx,
		`DELETE FROM docs WHERE rowid IN (
			SELECT rowid FROM docs WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)`,
		now, n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: sweeping expired documents: %w", err)
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: sweeping expired documents: %w", err)
	}
	return int(deleted), nil
}
