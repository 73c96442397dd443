package sqlite_test

import (
	"context"
	"database/sql"

	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/store/sqlite"
)

// slowInsert takes seconds, so a short context interrupts it; SQLite then
// rolls the whole transaction back by itself.
const slowInsert = `INSERT INTO big WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r LIMIT 100000000) SELECT i FROM r`

func interruptedStatement(ctx context.Context, t *testing.T, tx idem.Tx) {
	t.Helper()
	var conn *sql.Conn
	if !tx.As(&conn) {
		t.Fatal("As(*sql.Conn) = false")
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS big(x)`); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := conn.ExecContext(sctx, slowInsert); err == nil {
		t.Fatal("the slow statement was not interrupted")
	}
}

func exists(t *testing.T, s idem.Store, k idem.Key) bool {
	t.Helper()
	err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// After SQLite rolled the transaction back, fn's later writes would run
// outside any transaction and be kept one by one. The store refuses them and
// the commit, and reports a plain failure, not an unknown outcome.
func TestInterruptedStatementRollsBackEverything(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := idem.Key{Collection: "c", ID: "a"}, idem.Key{Collection: "c", ID: "b"}
	var later error
	err = s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Put(ctx, a, map[string]int{"v": 1}); err != nil {
			return err
		}
		interruptedStatement(ctx, t, tx)
		later = tx.Create(ctx, b, map[string]int{"v": 2}) // the error is ignored, as a careless fn would
		return nil
	})
	if err == nil || errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("Run = %v, want a plain failure", err)
	}
	if later == nil {
		t.Error("a write after the rollback was accepted")
	}
	if exists(t, s, a) || exists(t, s, b) {
		t.Errorf("transaction applied partly: a=%v b=%v", exists(t, s, a), exists(t, s, b))
	}
}

// Through the middleware: a handler that ignores an interrupted statement
// must not leave an op record that replays a success whose writes were lost.
func TestInterruptedHandlerLeavesNoOpRecord(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := idem.Key{Collection: "notes", ID: "a"}
	type in struct {
		Text string `json:"text"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, v in) (*mcp.CallToolResult, in, error) {
		if err := tx.Put(ctx, a, v); err != nil {
			return nil, in{}, err
		}
		interruptedStatement(ctx, t, tx) // a best-effort audit insert whose error is ignored
		return nil, v, nil
	}, idem.OpID())
	cs, err := idemtest.Connect(context.Background(), srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x", "op_id": "op-1"}})
	if err == nil && !res.IsError {
		t.Fatalf("the call reported success although SQLite rolled it back")
	}
	if _, err := oprecord.Lookup(context.Background(), s, "", "add", "op-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("op record left behind: %v", err)
	}
	if exists(t, s, a) {
		t.Error("the handler's write was kept")
	}
}

// A statement fn sends through As after SQLite's own rollback is refused
// too, not run in autocommit mode and kept.
func TestNativeStatementAfterRollbackIsRefused(t *testing.T) {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var after error
	err = s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		interruptedStatement(ctx, t, tx)
		var conn *sql.Conn
		tx.As(&conn)
		_, after = conn.ExecContext(ctx, `CREATE TABLE audit(x)`)
		if after == nil {
			_, after = conn.ExecContext(ctx, `INSERT INTO audit VALUES (1)`)
		}
		return nil
	})
	if err == nil || after == nil {
		t.Fatalf("Run = %v, statement after the rollback = %v; want both refused", err, after)
	}
	// The connection works normally for the next Run.
	k := idem.Key{Collection: "c", ID: "next"}
	if err := s.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		var conn *sql.Conn
		tx.As(&conn)
		if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS audit(x)`); err != nil {
			return err
		}
		return tx.Put(ctx, k, 1)
	}); err != nil {
		t.Fatalf("next Run: %v", err)
	}
	if !exists(t, s, k) {
		t.Error("next Run did not commit")
	}
}
