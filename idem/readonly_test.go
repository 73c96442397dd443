package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// txKinds is a memory store that counts its transactions of each
// kind.
type txKinds struct {
	*memory.Store
	runs, readOnly atomic.Int32
}

func (s *txKinds) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	s.runs.Add(1)
	return s.Store.Run(ctx, fn)
}

func (s *txKinds) RunReadOnly(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	s.readOnly.Add(1)
	return s.Store.RunReadOnly(ctx, fn)
}

// A read-only tool's call runs in a read-only transaction: the handler
// reads what is committed, and its write fails with backend.ErrReadOnly,
// answered not_saved, and writes nothing. The same handler registered
// without the hint writes. get_operation runs read-only too.
func TestReadOnlyToolRunsReadOnly(t *testing.T) {
	ctx := ctxFor(t)
	s := &txKinds{Store: memory.New(nil)}
	src, dst := idem.Key{Collection: "notes", ID: "src"}, idem.Key{Collection: "notes", ID: "dst"}
	if err := s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Put(ctx, src, Note{Text: "kept"}) }); err != nil {
		t.Fatal(err)
	}
	var read Note
	var writeErr error
	copyNote := func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Note, error) {
		read = Note{}
		if _, err := tx.Get(ctx, src, &read); err != nil {
			return nil, Note{}, err
		}
		writeErr = tx.Put(ctx, dst, read)
		return nil, read, writeErr
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "peek", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s, copyNote)
	idem.AddTool(srv, &mcp.Tool{Name: "copy"}, s, copyNote)
	idem.RegisterStatusTool(srv, s)
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	exists := func() bool {
		_, err := s.Read(ctx, dst, nil)
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	runs, readOnly := s.runs.Load(), s.readOnly.Load()
	res, err := cs.CallTool(ctx, call("peek", nil))
	if err != nil {
		t.Fatal(err)
	}
	if read.Text != "kept" {
		t.Errorf("the read-only handler read %+v, want the committed note", read)
	}
	if !errors.Is(writeErr, backend.ErrReadOnly) {
		t.Errorf("a write in a read-only tool: %v, want an error wrapping backend.ErrReadOnly", writeErr)
	}
	if !res.IsError || codeOf(res) != "not_saved" || !strings.Contains(textOf(res), "read-only") {
		t.Errorf("answer: error %v, code %q, %q; want not_saved saying the transaction is read-only", res.IsError, codeOf(res), textOf(res))
	}
	if exists() {
		t.Error("the read-only tool's write was kept")
	}
	if got := s.readOnly.Load() - readOnly; got != 1 || s.runs.Load() != runs {
		t.Errorf("the read-only call ran %d read-only transactions and %d others; want 1 and 0", got, s.runs.Load()-runs)
	}

	res, err = cs.CallTool(ctx, call("copy", nil))
	if err != nil || res.IsError || writeErr != nil || !exists() {
		t.Fatalf("the same handler without the hint: %v %v, write %v, kept %v; want it written", err, textOf(res), writeErr, exists())
	}

	runs, readOnly = s.runs.Load(), s.readOnly.Load()
	res, err = cs.CallTool(ctx, call("get_operation", map[string]any{"tool": "copy", "op_id": "op-1"}))
	if err != nil || res.IsError {
		t.Fatalf("get_operation: %v %v", err, textOf(res))
	}
	if got := s.readOnly.Load() - readOnly; got != 1 || s.runs.Load() != runs {
		t.Errorf("get_operation ran %d read-only transactions and %d others; want 1 and 0", got, s.runs.Load()-runs)
	}
}

// A Guard's get_operation reads the op record in a read-only transaction.
func TestGuardLookupRunsReadOnly(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	s := &txKinds{Store: memory.New(nil)}
	srv := trackerServer(tr, idem.New(s, nil), idem.Tools{"create_issue": {idem.RequireOpID()}})
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, call("create_issue", map[string]any{"title": "one", "op_id": "op-1"}))
	if err != nil || res.IsError {
		t.Fatalf("create_issue: %v %v", err, res)
	}
	runs, readOnly := s.runs.Load(), s.readOnly.Load()
	st, err := cs.CallTool(ctx, call("get_operation", map[string]any{"tool": "create_issue", "op_id": "op-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, st); !strings.Contains(got, `"status":"committed"`) {
		t.Fatalf("get_operation: %s, want committed", got)
	}
	if got := s.readOnly.Load() - readOnly; got != 1 || s.runs.Load() != runs {
		t.Errorf("get_operation ran %d read-only transactions and %d others; want 1 and 0", got, s.runs.Load()-runs)
	}
}
