package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/sqlite"
)

// holdWriter runs a Run that writes k and then holds the writer until the
// returned release is called, which waits for the Run to end.
func holdWriter(t *testing.T, s *sqlite.Store, k idem.Key) (release func()) {
	t.Helper()
	held, stop, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		once := false
		done <- s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			if err := tx.Put(ctx, k, note{Text: "uncommitted"}); err != nil {
				return err
			}
			if !once {
				once = true
				close(held)
			}
			select {
			case <-stop:
			case <-time.After(time.Minute):
			}
			return nil
		})
	}()
	release = func() {
		close(stop)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the held write: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the held write did not end a minute after its release")
		}
	}
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the write ended before it was held: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not start within 30 s")
	}
	return release
}

// A read-only tool's call is answered while another goroutine holds the
// writer, from what was committed.
func TestReadOnlyToolWhileWriterHeld(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n"}
	if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, note{Text: "committed"}) }); err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "peek", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, note, error) {
			var n note
			_, err := tx.Get(ctx, k, &n)
			return nil, n, err
		})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peek"}); err != nil || res.IsError {
		t.Fatalf("peek: %v %+v", err, res)
	}

	release := holdWriter(t, s, k)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peek"})
		answered <- answer{res, err}
	}()
	select {
	case a := <-answered:
		took := time.Since(start)
		release()
		if a.err != nil || a.res.IsError {
			t.Fatalf("peek while the writer is held: %v %+v", a.err, a.res)
		}
		if got, _ := a.res.StructuredContent.(map[string]any); got["text"] != "committed" {
			t.Errorf("peek while the writer is held read %v, want the committed note", a.res.StructuredContent)
		}
		t.Logf("a read-only tool's call while another goroutine holds the writer: %v", took)
	case <-time.After(5 * time.Second):
		release()
		t.Error("a read-only tool's call was not answered within 5 s while another goroutine held the writer")
		select {
		case <-answered:
		case <-time.After(time.Minute):
			t.Error("the call was not answered a minute after the writer's release")
		}
	}
}

// The connection As hands out in a read-only transaction refuses writes:
// nothing fn sends through it is kept.
func TestReadOnlyConnRefusesWrites(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	var create, insert error
	err := s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var conn *sql.Conn
		if !tx.As(&conn) {
			return errors.New("As(**sql.Conn) = false in a read-only transaction")
		}
		_, create = conn.ExecContext(ctx, `CREATE TABLE audit (x)`)
		_, insert = conn.ExecContext(ctx, `INSERT INTO docs_seq (one, last) VALUES (2, 0)`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if create == nil || insert == nil {
		t.Errorf("writes through a read-only transaction's connection: CREATE %v, INSERT %v; want both refused", create, insert)
	}
	err = s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		var conn *sql.Conn
		tx.As(&conn)
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'audit'`).Scan(&n); err != nil || n != 0 {
			return errors.Join(err, errors.New("the table created in a read-only transaction is there"))
		}
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM docs_seq`).Scan(&n); err != nil || n != 1 {
			return errors.Join(err, errors.New("the row inserted in a read-only transaction is there"))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// A panic in a read-only transaction's fn ends the transaction and goes
// on; the next one reads normally.
func TestReadOnlyPanic(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n"}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Get: %v", err)
			}
			panic("boom")
		})
	}()
	if err := s.Run(t.Context(), func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, note{Text: "x"}) }); err != nil {
		t.Fatal(err)
	}
	for range 8 { // more than the connections kept: each is reused or new
		err := s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, nil)
			return err
		})
		if err != nil {
			t.Fatalf("a read-only transaction after a panic: %v", err)
		}
	}
}

// RunReadOnly after Close fails; one in progress at Close ends normally.
func TestReadOnlyAndClose(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := idem.Key{Collection: "notes", ID: "n"}
	inFn, closed, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- s.RunReadOnly(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			close(inFn)
			select {
			case <-closed:
			case <-time.After(time.Minute):
			}
			_, err := tx.Get(ctx, k, nil)
			if errors.Is(err, idem.ErrNotFound) {
				err = nil
			}
			return err
		})
	}()
	select {
	case <-inFn:
	case <-time.After(30 * time.Second):
		t.Fatal("RunReadOnly did not start within 30 s")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(closed)
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("a RunReadOnly in progress at Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a RunReadOnly in progress at Close did not end")
	}
	err = s.RunReadOnly(context.Background(), func(context.Context, idem.Tx) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("RunReadOnly after Close: %v, want the store closed", err)
	}
}

// A read interrupted by its context does not end a read-only transaction:
// the reads after it are of the same snapshot.
func TestReadOnlyInterruptedReadKeepsSnapshot(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.db"), nil)
	k := idem.Key{Collection: "notes", ID: "n"}
	put := func(ctx context.Context, text string) error {
		return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, k, note{Text: text}) })
	}
	if err := put(t.Context(), "before"); err != nil {
		t.Fatal(err)
	}
	var interrupted error
	var after note
	err := s.RunReadOnly(t.Context(), func(ctx context.Context, tx idem.Tx) error {
		if _, err := tx.Get(ctx, k, nil); err != nil {
			return err
		}
		if err := put(ctx, "after"); err != nil {
			return err
		}
		var conn *sql.Conn
		tx.As(&conn)
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		var n int
		interrupted = conn.QueryRowContext(sctx, `WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r LIMIT 1000000000) SELECT count(*) FROM r`).Scan(&n)
		_, err := tx.Get(ctx, k, &after)
		return err
	})
	if interrupted == nil {
		t.Fatal("the slow read was not interrupted")
	}
	if err != nil || after.Text != "before" {
		t.Errorf("after an interrupted read: %+v, %v; want the snapshot's note", after, err)
	}
}
