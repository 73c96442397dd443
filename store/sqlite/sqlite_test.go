package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend/kit"
	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

const maxDoc = 64 << 10

func open(t testing.TB, path string, opts *sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			return open(t, filepath.Join(t.TempDir(), "idem.db"), &sqlite.Options{Now: now, MaxDocumentBytes: maxDoc, NoSweep: true})
		},
		MaxDocumentBytes: maxDoc,
		Serialized:       true,
		Reader:           true,
		ReadOnlyRunner:   true,
		Sweeper:          true,
		As:               []any{new(*sql.Conn)},
		AsWrite: func(ctx context.Context, tx idem.Tx, id string) error {
			conn, err := nativeConn(ctx, tx)
			if err == nil {
				_, err = conn.ExecContext(ctx, `INSERT INTO native (id) VALUES (?)`, id)
			}
			return err
		},
		AsRead: func(ctx context.Context, tx idem.Tx, id string) (bool, error) {
			conn, err := nativeConn(ctx, tx)
			if err != nil {
				return false, err
			}
			var n int
			err = conn.QueryRowContext(ctx, `SELECT count(*) FROM native WHERE id = ?`, id).Scan(&n)
			return n == 1, err
		},
	})
}

// nativeConn returns tx's connection, with a table of the server's own
// (native) in the database file: the conformance suite's native writes.
func nativeConn(ctx context.Context, tx idem.Tx) (*sql.Conn, error) {
	var conn *sql.Conn
	if !tx.As(&conn) {
		return nil, errors.New("As(**sql.Conn) = false")
	}
	_, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS native (id TEXT PRIMARY KEY)`)
	return conn, err
}

type note struct {
	Text string `json:"text"`
}

func TestDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with ?#% chars", "idem.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	k := idem.Key{Collection: "notes", ID: "n1"}
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	var v1 idem.Version
	err = s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, k, note{Text: "kept"}); err != nil {
			return err
		}
		var err error
		v1, err = tx.Get(ctx, k, nil)
		return err
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at the path given: %v", err)
	}

	s = open(t, path, nil)
	var got note
	var v2 idem.Version
	err = s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var err error
		v2, err = tx.Get(ctx, k, &got)
		if err != nil {
			return err
		}
		// The version sequence survives too: a new write gets a new version.
		if err := tx.Delete(ctx, k, 0); err != nil {
			return err
		}
		if err := tx.Create(ctx, k, note{Text: "again"}); err != nil {
			return err
		}
		v3, err := tx.Get(ctx, k, nil)
		if err != nil {
			return err
		}
		if v3 == v1 {
			t.Errorf("version %d reused after reopening", v3)
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("Run after reopen: %v", err)
	}
	if got.Text != "kept" || v2 != v1 {
		t.Fatalf("after reopen: %+v at version %d, want {kept} at %d", got, v2, v1)
	}
}

// TestAsConn: a server's own table written through As(*sql.Conn) commits and
// rolls back with the documents.
func TestAsConn(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n1"}
	write := func(text string, fail error) error {
		return s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			var conn *sql.Conn
			if !tx.As(&conn) || conn == nil {
				return errors.New("As(*sql.Conn) = false")
			}
			var other *int
			if tx.As(&other) {
				return errors.New("As(*int) = true")
			}
			if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS mine (text TEXT)`); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, `INSERT INTO mine (text) VALUES (?)`, text); err != nil {
				return err
			}
			if err := tx.Put(ctx, k, note{Text: text}); err != nil {
				return err
			}
			return fail
		})
	}
	if err := write("one", nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	errFail := errors.New("fail")
	if err := write("two", errFail); !errors.Is(err, errFail) {
		t.Fatalf("Run = %v, want errFail", err)
	}
	var texts []string
	var got note
	err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var conn *sql.Conn
		tx.As(&conn)
		rows, err := conn.QueryContext(ctx, `SELECT text FROM mine`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			texts = append(texts, s)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.Get(ctx, k, &got)
		return err
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(texts) != 1 || texts[0] != "one" || got.Text != "one" {
		t.Fatalf("after a commit and a rollback: table %q, document %+v; want [one] and {one}", texts, got)
	}
}

// TestTwoStoresOneFile: two Stores on one file, as two processes would have,
// increment one counter concurrently; BEGIN IMMEDIATE and the busy timeout
// must order them so that no increment is lost and none fails.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.db")
	stores := []*sqlite.Store{open(t, path, nil), open(t, path, nil)}
	k := idem.Key{Collection: "counters", ID: "c"}
	if err := stores[0].Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, k, 0)
	}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- stores[i%2].Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
				var c int
				if _, err := tx.Get(ctx, k, &c); err != nil {
					return err
				}
				time.Sleep(time.Millisecond) // let the other store's transaction try to interleave
				return tx.Put(ctx, k, c+1)
			})
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("incrementer: %v", err)
		}
	}
	var c int
	if err := stores[1].Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, &c)
		return err
	}); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if c != n {
		t.Fatalf("counter is %d after %d increments", c, n)
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "a\x00b"} {
		if s, err := sqlite.Open(p, nil); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", p)
		}
	}
	if _, err := sqlite.Open(filepath.Join(t.TempDir(), "missing", "dir", "x.db"), nil); err == nil {
		t.Error("Open in a missing directory succeeded, want an error")
	}
}

func TestSweepRejectsBadLimit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	for _, limit := range []int{0, -1} {
		if n, err := s.Sweep(t.Context(), limit); err == nil || n != 0 {
			t.Errorf("Sweep(%d) = %d, %v; want 0 and an error", limit, n, err)
		}
	}
}

func TestTxUnusableAfterRun(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n1"}
	var leaked idem.Tx
	if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		leaked = tx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := leaked.Put(t.Context(), k, note{Text: "late"}); err == nil {
		t.Fatal("Put on a Tx after Run returned succeeded")
	}
	var conn *sql.Conn
	if leaked.As(&conn) {
		t.Fatal("As on a Tx after Run returned handed out the connection")
	}
	err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
}

// TestCommitFailureIsUnknownOutcome ends the transaction behind Run's back,
// so that Run's own COMMIT fails: Run must report an unknown outcome, keep
// the native error reachable, and go on working.
func TestCommitFailureIsUnknownOutcome(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n1"}
	err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Put(ctx, k, note{Text: "one"}); err != nil {
			return err
		}
		var conn *sql.Conn
		tx.As(&conn)
		_, err := conn.ExecContext(ctx, "COMMIT")
		return err
	})
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("Run = %v, want ErrUnknownOutcome", err)
	}
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want the *sqlite.Error reachable", err)
	}
	var got note
	if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, &got)
		return err
	}); err != nil {
		t.Fatalf("Run after an unknown outcome: %v", err)
	}
	if got.Text != "one" {
		t.Fatalf("Get = %+v, want {one}", got)
	}
}

// TestNestedRunFails: a Run inside fn on the same store would wait for
// itself; it fails after the busy timeout instead of hanging.
func TestNestedRunFails(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), &sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	k := idem.Key{Collection: "notes", ID: "n1"}
	var inner error
	err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		inner = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return tx.Put(ctx, k, note{Text: "inner"})
		})
		return tx.Put(ctx, k, note{Text: "outer"})
	})
	if err != nil {
		t.Fatalf("outer Run: %v", err)
	}
	if inner == nil {
		t.Fatal("nested Run succeeded, want an error")
	}
}

// TestRunHonoursCancelWhileWaiting: a Run waiting for another transaction
// gives up when its context ends.
func TestRunHonoursCancelWhileWaiting(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var waited error
	err := s.Run(t.Context(), func(context.Context, idem.Tx) error {
		waited = s.Run(ctx, func(context.Context, idem.Tx) error { return nil })
		return nil
	})
	if err != nil {
		t.Fatalf("outer Run: %v", err)
	}
	if !errors.Is(waited, context.DeadlineExceeded) {
		t.Fatalf("waiting Run = %v, want context.DeadlineExceeded", waited)
	}
}

func TestBackgroundSweep(t *testing.T) {
	storetest.BackgroundSweep(t, func(t *testing.T, now func() time.Time, o kit.SweepOptions) (idem.Store, func() error) {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "bg.db"), &sqlite.Options{Now: now, NoSweep: o.Off, SweepEvery: o.Every, OnSweep: o.Report})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s, s.Close
	})
}
