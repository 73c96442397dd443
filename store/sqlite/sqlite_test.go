package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
	"github.com/idemkit/sdk/store/storetest"
)

const maxDoc = 64 << 10

func open(t *testing.T, path string, opts *sqlite.Options) *sqlite.Store {
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
			return open(t, filepath.Join(t.TempDir(), "idem.db"), &sqlite.Options{Now: now, MaxDocumentBytes: maxDoc})
		},
		MaxDocumentBytes: maxDoc,
		Serialized:       true,
	})
}

type note struct {
	Text string `json:"text"`
}

func TestDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with ?#% chars", "idem.db")
	if err := mkdirAll(filepath.Dir(path)); err != nil {
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

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

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
