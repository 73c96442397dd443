package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/internal/mwlib"
	"github.com/idemkit/sdk/internal/oprecord"
)

// runMiddleware runs the middleware suite on the store, and again with its
// Reader capability hidden when it has one, so that both paths of the op
// record (a read outside the transaction, and a read inside it) are tested
// on every backend.
func runMiddleware(t *testing.T, h Harness) {
	runMiddlewareSuite(t, h)
	if h.Reader {
		t.Run("WithoutReader", func(t *testing.T) {
			plain := h
			plain.Reader = false
			plain.New = func(t *testing.T, now func() time.Time) idem.Store { return noReader{h.New(t, now)} }
			runMiddlewareSuite(t, plain)
		})
	}
}

// runMiddlewareSuite runs each middleware case on its own store, through a
// real client.
func runMiddlewareSuite(t *testing.T, h Harness) {
	t.Run("StaleReadStillCommitsOnce", func(t *testing.T) { t.Parallel(); mwStaleReadStillCommitsOnce(t, h) })
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("UnknownOutcome/committed=%v", committed), func(t *testing.T) { t.Parallel(); mwUnknownOutcome(t, h, committed) })
	}
	t.Run("BusyWhileFirstRuns", func(t *testing.T) { t.Parallel(); mwBusyWhileFirstRuns(t, h) })
	t.Run("DifferentOpsOnOneRecordLoseNothing", func(t *testing.T) { t.Parallel(); mwDifferentOpsOnOneRecordLoseNothing(t, h) })
	t.Run("SameOpIDTwice", func(t *testing.T) { t.Parallel(); mwSameOpIDTwice(t, h) })
	t.Run("DropAfterCommitThenRetry", func(t *testing.T) { t.Parallel(); mwDropAfterCommitThenRetry(t, h) })
	t.Run("Concurrent64SameOpID", func(t *testing.T) { t.Parallel(); mwConcurrent64SameOpID(t, h) })
	t.Run("ConcurrentAcrossServers", func(t *testing.T) { t.Parallel(); mwConcurrentAcrossServers(t, h) })
	t.Run("RepeatOnAnotherServer", func(t *testing.T) { t.Parallel(); mwRepeatOnAnotherServer(t, h) })
	t.Run("KeyReused", func(t *testing.T) { t.Parallel(); mwKeyReused(t, h) })
	t.Run("ScopeOverHTTP", func(t *testing.T) { t.Parallel(); mwScopeOverHTTP(t, h) })
	t.Run("ScopesKeepOpsApart", func(t *testing.T) { t.Parallel(); mwScopesKeepOpsApart(t, h) })
	for _, mode := range []string{"error", "iserror", "panic"} {
		t.Run("RollbackOn_"+mode, func(t *testing.T) { t.Parallel(); mwRollbackOn(t, h, mode) })
	}
	t.Run("ExpiredOpRecordRunsAgain", func(t *testing.T) { t.Parallel(); mwExpiredOpRecordRunsAgain(t, h) })
	t.Run("CancelAfterHandlerStillCommits", func(t *testing.T) { t.Parallel(); mwCancelAfterHandlerStillCommits(t, h) })
	t.Run("BadInputRefusedAndWritesNothing", func(t *testing.T) { t.Parallel(); mwBadInputRefusedAndWritesNothing(t, h) })
	t.Run("KeyedWriteTwice", func(t *testing.T) { t.Parallel(); mwKeyedWriteTwice(t, h) })
	t.Run("GetOperation", func(t *testing.T) { t.Parallel(); mwGetOperation(t, h) })
	t.Run("OpRecordOwnedByScope", func(t *testing.T) { t.Parallel(); mwOpRecordOwnedByScope(t, h) })
	t.Run("HandlerErrorIsNotSaved", func(t *testing.T) { t.Parallel(); mwHandlerErrorIsNotSaved(t, h) })
	t.Run("SchemaRefusalQuotesNoValue", func(t *testing.T) { t.Parallel(); mwSchemaRefusalQuotesNoValue(t, h) })
	t.Run("NullOpIDRefused", func(t *testing.T) { t.Parallel(); mwNullOpIDRefused(t, h) })
	t.Run("ContendedIsNotBusy", func(t *testing.T) { t.Parallel(); mwContendedIsNotBusy(t, h) })
}

// mwSameOpIDTwice shows that a repeat of an op id, as an argument or in
// _meta, runs the handler once, commits once, runs after-commit hooks once
// and answers the first result marked as a replay.
func mwSameOpIDTwice(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	args := map[string]any{"text": "hello", "op_id": "op-1"}
	r1 := callTool(t, cs, "add_note", args, nil)
	r2 := callTool(t, cs, "add_note", args, nil)
	if got := f.execs.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	sameAnswer(t, r1, r2)
	if replayed(r1) || !replayed(r2) {
		t.Errorf("replay marker: first %v, second %v; want false, true", replayed(r1), replayed(r2))
	}
	// The op id may come in _meta instead; the fingerprint ignores it.
	r3 := callTool(t, cs, "add_note", map[string]any{"text": "hello"}, mcp.Meta{idem.MetaOpID: "op-1"})
	sameAnswer(t, r1, r3)
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1", got)
	}
	if got := f.hooks.Load(); got != 1 {
		t.Errorf("after-commit hooks ran %d times, want 1 (never on replay)", got)
	}
}

// mwDropAfterCommitThenRetry shows that a call whose response is lost after
// the commit, retried on a new connection, is answered from its op record.
func mwDropAfterCommitThenRetry(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.srv.Connect(t, "add_note")
	args := map[string]any{"text": "posted offline", "op_id": "op-drop"}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_note", Arguments: args}); err == nil {
		t.Fatal("first call succeeded; want the response lost")
	}
	rec := f.opRecord("", "add_note", "op-drop")
	if rec == nil {
		t.Fatal("no op record after the handler returned: the change did not commit")
	}
	cs2 := f.connect() // the client reconnects and retries
	r := callTool(t, cs2, "add_note", args, nil)
	if got := f.execs.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	if !replayed(r) || noteID(t, r) != "note-1" {
		t.Errorf("retry: replayed=%v id=%s; want the first answer, replayed", replayed(r), noteID(t, r))
	}
	var stored noteOut
	if err := json.Unmarshal(rec.StructuredOutput(), &stored); err != nil || stored.ID != noteID(t, r) {
		t.Errorf("retry answered %s, stored %s", noteID(t, r), rec.StructuredOutput())
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1", got)
	}
}

// mwConcurrent64SameOpID shows that 64 concurrent calls with one op id on one
// server run the handler once and all get its answer. The first run holds
// until all 64 calls have reached the server, and then until a second run
// starts or 50 ms pass, so the calls overlap on every store: a second run of
// the handler is what the test looks for, and on a fast store the calls
// would otherwise finish one after another.
func mwConcurrent64SameOpID(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	n := h.goroutines(64)
	var arrived atomic.Int64
	allArrived, second := make(chan struct{}), make(chan struct{})
	cfg := f.config()
	cfg.Arrived = func() {
		if arrived.Add(1) == int64(n) {
			close(allArrived)
		}
	}
	f.srv = f.lib.NewServer(t, cfg)
	f.hold = func(run int64) {
		switch run {
		case 1:
			select {
			case <-allArrived:
			case <-time.After(10 * time.Second):
				t.Errorf("only %d of %d calls reached the server while the first ran", arrived.Load(), n)
				return
			}
			select {
			case <-second:
			case <-time.After(50 * time.Millisecond):
			}
		case 2:
			close(second)
		}
	}
	cs := f.connect()
	args := map[string]any{"text": "once", "op_id": "op-64"}
	results := callAll(t, []*mcp.ClientSession{cs}, n, "add_note", args)
	if t.Failed() {
		return
	}
	if got := f.execs.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	for _, r := range results[1:] {
		sameAnswer(t, results[0], r)
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1", got)
	}
}

// mwConcurrentAcrossServers shows that concurrent calls with one op id on
// two servers over one store commit once and all get one answer. The two
// servers stand for two processes: nothing in memory is shared, only the
// store's conditions keep it to one.
func mwConcurrentAcrossServers(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	sessions := []*mcp.ClientSession{f.connect(), f.newServer().Connect(t, "")}
	args := map[string]any{"text": "twice", "op_id": "op-2p"}
	results := callAll(t, sessions, h.goroutines(16), "add_note", args)
	if t.Failed() {
		return
	}
	for _, r := range results[1:] {
		sameAnswer(t, results[0], r)
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1 (handler ran %d times)", got, f.execs.Load())
	}
}

// mwRepeatOnAnotherServer shows that a repeat reaching a process that never
// saw the op is a replay. That process does not read the op record first, so
// its handler runs, and the op record's create at commit must refuse the
// attempt and replay.
func mwRepeatOnAnotherServer(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	args := map[string]any{"text": "moved", "op_id": "op-moved"}
	r1 := callTool(t, f.connect(), "add_note", args, nil)
	r2 := callTool(t, f.newServer().Connect(t, ""), "add_note", args, nil)
	sameAnswer(t, r1, r2)
	if !replayed(r2) {
		t.Error("the repeat on the other server was not a replay")
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1 (handler ran %d times)", got, f.execs.Load())
	}
	if got := f.hooks.Load(); got != 1 {
		t.Errorf("after-commit hooks ran %d times, want 1", got)
	}
}

// mwKeyReused shows that an op id sent again with other arguments is refused
// with key_reused, without revealing the stored result or echoing the
// arguments, and runs nothing.
func mwKeyReused(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	r1 := callTool(t, cs, "add_note", map[string]any{"text": "first", "op_id": "op-r"}, nil)
	id := noteID(t, r1)
	r2 := callTool(t, cs, "add_note", map[string]any{"text": secret, "op_id": "op-r"}, nil)
	if !r2.IsError || errCode(r2) != string(idem.CodeKeyReused) {
		t.Fatalf("reuse: IsError=%v code=%q, want key_reused", r2.IsError, errCode(r2))
	}
	text := resultText(r2)
	if strings.Contains(text, id) || strings.Contains(text, "first") || strings.Contains(text, secret) {
		t.Errorf("key_reused reveals the stored result or echoes arguments: %q", text)
	}
	if r2.StructuredContent != nil {
		if b, _ := json.Marshal(r2.StructuredContent); strings.Contains(string(b), id) {
			t.Errorf("key_reused reveals the stored result: %s", b)
		}
	}
	if got := f.execs.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1", got)
	}
}

// mwScopeOverHTTP shows that op ids are kept per authenticated user over
// HTTP: two users' same op id are two operations, a tool that requires a
// scope refuses an anonymous caller, and get_operation answers within the
// caller's scope.
func mwScopeOverHTTP(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	connect := f.serveHTTP(map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := connect("tok-alice"), connect("tok-bob")
	args := map[string]any{"text": "same words", "op_id": "shared-op"}
	ra := callTool(t, alice, "scoped_note", args, nil)
	rb := callTool(t, bob, "scoped_note", args, nil)
	if replayed(rb) || noteID(t, rb) == noteID(t, ra) {
		t.Fatalf("bob got alice's result (replayed=%v, id %s)", replayed(rb), noteID(t, rb))
	}
	if got := f.execs.Load(); got != 2 {
		t.Errorf("handler ran %d times, want 2 (one per user)", got)
	}
	rb2 := callTool(t, bob, "scoped_note", args, nil)
	if !replayed(rb2) || noteID(t, rb2) != noteID(t, rb) {
		t.Errorf("bob's retry: replayed=%v id %s, want his own %s", replayed(rb2), noteID(t, rb2), noteID(t, rb))
	}
	if f.opRecord("alice", "scoped_note", "shared-op") == nil || f.opRecord("bob", "scoped_note", "shared-op") == nil {
		t.Error("want one op record per user")
	}
	// Without a token (in-memory), a server that requires a scope refuses.
	cfg := f.config()
	cfg.Options.RequireScope = true
	r := callTool(t, f.lib.NewServer(t, cfg).Connect(t, ""), "scoped_note", map[string]any{"text": "x", "op_id": "anon"}, nil)
	if errCode(r) != string(idem.CodeScopeRequired) {
		t.Errorf("anonymous call: code %q, want scope_required", errCode(r))
	}
	if got := f.execs.Load(); got != 2 {
		t.Errorf("refused call ran the handler (%d runs)", got)
	}
	// get_operation answers within the caller's scope: bob cannot learn
	// about an operation only alice sent.
	callTool(t, alice, "scoped_note", map[string]any{"text": "private", "op_id": "alice-only"}, nil)
	status := func(cs *mcp.ClientSession) string {
		st := callTool(t, cs, "get_operation", map[string]any{"tool": "scoped_note", "op_id": "alice-only"}, nil)
		b, _ := json.Marshal(st.StructuredContent)
		var got struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(b, &got)
		return got.Status
	}
	if a, b := status(alice), status(bob); a != "committed" || b != "not_committed" {
		t.Errorf("get_operation of alice's op: alice sees %q, bob sees %q; want committed, not_committed", a, b)
	}
}

// mwScopesKeepOpsApart shows, without HTTP, that op ids are kept per scope
// (here a tenant named in _meta, through the server's scope): two tenants' same op
// id with the same arguments are two operations, each tenant's repeat
// replays its own answer, and one tenant's other arguments under that op id
// are not key_reused against the other's.
func mwScopesKeepOpsApart(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	const metaTenant = "storetest/tenant"
	cs := f.lib.NewServer(t, mwlib.Config{Store: f.store, Options: idem.Options{Now: f.clock.Now, TTL: opTTL},
		Scope: func(ctx context.Context, r mwlib.Request) string {
			tenant, _ := r.Meta()[metaTenant].(string)
			return tenant
		},
		Tools: []mwlib.Tool{{Name: "tenant_note", Handler: mwlib.Handler[noteIn, noteOut](f.addNote), Options: []idem.Option{idem.OpID()}}},
	}).Connect(t, "")
	call := func(tenant, text string) *mcp.CallToolResult {
		t.Helper()
		r := callTool(t, cs, "tenant_note", map[string]any{"text": text}, mcp.Meta{metaTenant: tenant, idem.MetaOpID: "op-tenants"})
		if r.IsError {
			t.Fatalf("%s's call: code %q: %s", tenant, errCode(r), resultText(r))
		}
		return r
	}
	ra, rb := call("acme", "same words"), call("globex", "same words")
	if replayed(rb) || noteID(t, rb) == noteID(t, ra) {
		t.Fatalf("globex got acme's answer (replayed=%v, note %s)", replayed(rb), noteID(t, rb))
	}
	if rb2 := call("globex", "same words"); !replayed(rb2) || noteID(t, rb2) != noteID(t, rb) {
		t.Errorf("globex's repeat: replayed=%v note %s, want its own %s replayed", replayed(rb2), noteID(t, rb2), noteID(t, rb))
	}
	if rc := call("initech", "other words"); replayed(rc) {
		t.Errorf("initech's call with other arguments was answered from another tenant's record")
	}
	if got := f.execs.Load(); got != 3 {
		t.Errorf("handler ran %d times, want 3 (one per tenant)", got)
	}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		if f.opRecord(tenant, "tenant_note", "op-tenants") == nil {
			t.Errorf("no op record under tenant %s", tenant)
		}
	}
	if f.opRecord("", "tenant_note", "op-tenants") != nil {
		t.Error("an op record is stored without a scope")
	}
}

// mwRollbackOn shows that a handler failing in the given mode (an error, an
// IsError result, a panic) is answered as an error, leaves no note, op record
// or hook behind, and that a retry runs afresh.
func mwRollbackOn(t *testing.T, h Harness, mode string) {
	f := newMWFixture(t, h)
	cs := f.connect()
	args := map[string]any{"text": "x", "op_id": "op-fail"}
	f.fail.Store(mode)
	r := callTool(t, cs, "add_note", args, nil)
	if !r.IsError {
		t.Fatalf("failed handler: result is not an error")
	}
	if mode == "panic" && errCode(r) != string(idem.CodeInternal) {
		t.Errorf("panic: code %q, want internal", errCode(r))
	}
	if f.committedNotes() != 0 || f.opRecord("", "add_note", "op-fail") != nil || f.hooks.Load() != 0 {
		t.Fatalf("failed call left writes: notes=%d hooks=%d", f.committedNotes(), f.hooks.Load())
	}
	f.fail.Store("")
	r2 := callTool(t, cs, "add_note", args, nil)
	if r2.IsError || replayed(r2) {
		t.Fatalf("retry after failure: IsError=%v replayed=%v; want a fresh run", r2.IsError, replayed(r2))
	}
	if f.execs.Load() != 2 || f.committedNotes() != 1 {
		t.Errorf("after retry: runs=%d committed=%d, want 2 and 1", f.execs.Load(), f.committedNotes())
	}
}

// mwExpiredOpRecordRunsAgain shows that a repeat is replayed within the TTL
// and runs again after it.
func mwExpiredOpRecordRunsAgain(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	args := map[string]any{"text": "x", "op_id": "op-ttl"}
	callTool(t, cs, "add_note", args, nil)
	f.clock.Advance(opTTL - time.Second)
	if r := callTool(t, cs, "add_note", args, nil); !replayed(r) {
		t.Fatal("call within the TTL was not replayed")
	}
	f.clock.Advance(2 * time.Second)
	r := callTool(t, cs, "add_note", args, nil)
	if replayed(r) || f.execs.Load() != 2 {
		t.Errorf("after the TTL: replayed=%v runs=%d, want a second run", replayed(r), f.execs.Load())
	}
}

// mwCancelAfterHandlerStillCommits shows that a client giving up as the
// handler returns does not stop the commit of its writes and op record.
func mwCancelAfterHandlerStillCommits(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := idem.Key{Collection: "notes", ID: "cancelled"}
	add := func(hctx context.Context, tx idem.Tx, r mwlib.Request, in noteIn) (*mwlib.ErrorResult, noteOut, error) {
		if err := tx.Create(hctx, k, in); err != nil {
			return nil, noteOut{}, err
		}
		cancel() // the client gives up as the handler returns
		select { // until the cancellation reached the server
		case <-hctx.Done():
		case <-time.After(2 * time.Second):
		}
		return nil, noteOut{ID: k.ID}, nil
	}
	cs := f.serve(mwlib.Tool{Name: "add_note", Handler: mwlib.Handler[noteIn, noteOut](add),
		Options: []idem.Option{idem.OpID()}}).Connect(t, "")
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"text": "x", "op_id": "op-c"}})
	if err == nil {
		t.Log("the call answered before its cancellation") // the commit is checked either way
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.opRecord("", "add_note", "op-c") == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the server commits after the client gave up
	}
	if f.opRecord("", "add_note", "op-c") == nil {
		t.Fatal("op record not committed after cancellation")
	}
	err = f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if err != nil {
		t.Fatalf("handler's write not committed after cancellation: %v", err)
	}
}

// mwBadInputRefusedAndWritesNothing shows that malformed op ids, missing
// keys and ambiguous targets are refused with their codes, never echo an
// argument, run no handler and write nothing, while well-formed calls to the
// same tools work.
func mwBadInputRefusedAndWritesNothing(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	cases := []struct {
		name, tool string
		args       map[string]any
		meta       mcp.Meta
		code       idem.Code
	}{
		{"missing key", "set_status", map[string]any{"status": secret}, nil, idem.CodeMissingKey},
		{"empty key", "set_status", map[string]any{"handle": "", "status": secret}, nil, idem.CodeMissingKey},
		{"empty op id", "add_note", map[string]any{"text": secret, "op_id": ""}, nil, idem.CodeInvalidOpID},
		{"long op id", "add_note", map[string]any{"text": secret, "op_id": strings.Repeat("x", 129)}, nil, idem.CodeInvalidOpID},
		{"control char op id", "add_note", map[string]any{"text": secret, "op_id": "op\x01" + secret}, nil, idem.CodeInvalidOpID},
		{"space in op id", "add_note", map[string]any{"text": secret, "op_id": "op " + secret}, nil, idem.CodeInvalidOpID},
		{"op id not a string", "add_note", map[string]any{"text": secret, "op_id": 42}, nil, idem.CodeInvalidOpID},
		{"meta op id not a string", "add_note", map[string]any{"text": secret}, mcp.Meta{idem.MetaOpID: 42}, idem.CodeInvalidOpID},
		{"argument and meta differ", "add_note", map[string]any{"text": secret, "op_id": "a-" + secret}, mcp.Meta{idem.MetaOpID: "b-" + secret}, idem.CodeInvalidOpID},
		{"close without id", "close_session", map[string]any{}, nil, target.CodeAmbiguous},
		{"queued close without id", "close_session", map[string]any{"op_id": "q-1"}, nil, target.CodeAmbiguous},
		// The schema's refusals, which the middleware's fast check of
		// arguments must leave to the full validator.
		{"required argument missing", "add_note", map[string]any{"priority": 1, "op_id": "r-1"}, nil, idem.CodeInvalidArguments},
		{"string below its minLength in code points, not bytes", "set_label", map[string]any{"handle": "h", "status": "éé"}, nil, idem.CodeInvalidArguments},
	}
	for _, c := range cases {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args, Meta: c.meta})
		if err != nil {
			// The schema may refuse before the middleware; that writes
			// nothing either, but the error must not echo the value.
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: protocol error echoes an argument: %v", c.name, err)
			}
			continue
		}
		if !r.IsError {
			t.Errorf("%s: not refused", c.name)
			continue
		}
		if got := errCode(r); got != string(c.code) {
			t.Errorf("%s: code %q, want %q (%s)", c.name, got, c.code, resultText(r))
		}
		if strings.Contains(resultText(r), secret) {
			t.Errorf("%s: refusal echoes an argument: %q", c.name, resultText(r))
		}
		if c.code == target.CodeAmbiguous {
			cands, _ := json.Marshal(r.Meta["io.idemkit/candidates"])
			if string(cands) != `[{"id":"s-1","label":"phone"},{"id":"s-2","label":"laptop"}]` {
				t.Errorf("%s: candidates %s", c.name, cands)
			}
		}
	}
	if f.execs.Load() != 0 || f.statuses.Load() != 0 {
		t.Errorf("refused calls ran handlers: add_note %d, set_status %d", f.execs.Load(), f.statuses.Load())
	}
	err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		for _, k := range []idem.Key{{Collection: "closed", ID: "s-1"}, {Collection: "closed", ID: "s-2"}, {Collection: "statuses", ID: "x"}, {Collection: "statuses", ID: "h"}} {
			if _, err := tx.Get(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
				return fmt.Errorf("%s: %v", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("refused calls wrote: %v", err)
	}
	// The keyed write with its key, and a close that names its id, work.
	if r := callTool(t, cs, "set_status", map[string]any{"handle": "x", "status": "ok"}, nil); r.IsError {
		t.Errorf("keyed write: %s", resultText(r))
	}
	if r := callTool(t, cs, "close_session", map[string]any{"session_id": "s-1", "op_id": "q-2"}, nil); r.IsError {
		t.Errorf("close with id: %s", resultText(r))
	}
}

// mwKeyedWriteTwice shows that a keyed write sent twice without an op id
// answers alike and stores one record.
func mwKeyedWriteTwice(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	args := map[string]any{"handle": "ada", "status": "writing"}
	r1 := callTool(t, cs, "set_status", args, nil)
	r2 := callTool(t, cs, "set_status", args, nil)
	sameAnswer(t, r1, r2)
	var got statusIn
	err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, idem.Key{Collection: "statuses", ID: "ada"}, &got)
		return err
	})
	if err != nil || !reflect.DeepEqual(got, statusIn{Handle: "ada", Status: "writing"}) {
		t.Errorf("stored %+v, %v", got, err)
	}
}

// mwGetOperation shows that get_operation reports a committed op with its
// output and commit time, an unknown op as not committed, and looks op ids
// up per tool.
func mwGetOperation(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	r1 := callTool(t, cs, "add_note", map[string]any{"text": "x", "op_id": "op-s"}, nil)
	st := callTool(t, cs, "get_operation", map[string]any{"tool": "add_note", "op_id": "op-s"}, nil)
	var got struct {
		Status      string     `json:"status"`
		Output      noteOut    `json:"output"`
		CommittedAt *time.Time `json:"committed_at"`
	}
	b, _ := json.Marshal(st.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || got.Status != "committed" {
		t.Fatalf("get_operation: %s", b)
	}
	// The tool's own answer carries what the first call answered.
	if got.Output.ID != noteID(t, r1) || got.CommittedAt == nil || !got.CommittedAt.Equal(f.clock.Now()) {
		t.Errorf("get_operation answered %s; want output id %s committed at %s", b, noteID(t, r1), f.clock.Now())
	}
	st = callTool(t, cs, "get_operation", map[string]any{"tool": "add_note", "op_id": "never-sent"}, nil)
	b, _ = json.Marshal(st.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || got.Status != "not_committed" {
		t.Errorf("unknown op: %s", b)
	}
	// An op id is looked up per tool: the same op id under another tool
	// is another operation.
	st = callTool(t, cs, "get_operation", map[string]any{"tool": "scoped_note", "op_id": "op-s"}, nil)
	if b, _ = json.Marshal(st.StructuredContent); !strings.Contains(string(b), "not_committed") {
		t.Errorf("another tool's op id answered %s", b)
	}
}

// mwStaleReadStillCommitsOnce shows that a repeat on a server whose reads
// miss the op record (a stale snapshot, a lagging replica) runs its handler
// but does not commit a second time.
func mwStaleReadStillCommitsOnce(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	args := map[string]any{"text": "x", "op_id": "op-stale"}
	r1 := callTool(t, f.connect(), "add_note", args, nil)
	// A second server whose reads miss the op record on first attempts.
	f.store = staleReads{f.store}
	r2 := callTool(t, f.newServer().Connect(t, ""), "add_note", args, nil)
	if got := f.execs.Load(); got != 2 {
		t.Fatalf("handler ran %d times, want 2: the stale first attempt must run it, and lose", got)
	}
	if got := f.committedNotes(); got != 1 {
		t.Fatalf("%d notes committed, want 1: the op record's create-if-absent did not hold", got)
	}
	sameAnswer(t, r1, r2)
}

// mwUnknownOutcome shows how a commit of unknown outcome is answered: when it
// landed, with the handler's own answer and its hooks run; when it did not,
// with unknown_outcome, and get_operation and a retry then settle it.
func mwUnknownOutcome(t *testing.T, h Harness, committed bool) {
	f := newMWFixture(t, h)
	us := &unknownCommit{Store: f.store, committed: committed}
	f.store = us
	cs := f.newServer().Connect(t, "")
	args := map[string]any{"text": secret, "op_id": "op-unknown"}
	us.armed.Store(true)
	r := callTool(t, cs, "add_note", args, nil)
	if committed {
		// The lookup after the lost commit finds the op record: the
		// first answer, as the handler made it, and the commit's
		// after-commit hooks run.
		if r.IsError || replayed(r) || noteID(t, r) != "note-1" {
			t.Fatalf("lost commit that landed: IsError=%v replayed=%v %s", r.IsError, replayed(r), resultText(r))
		}
		if got := f.hooks.Load(); got != 1 {
			t.Errorf("after-commit hooks ran %d times after a commit that landed, want 1", got)
		}
	} else {
		if errCode(r) != string(idem.CodeUnknownOutcome) || r.Meta[idem.MetaOpID] != "op-unknown" {
			t.Fatalf("lost commit that did not land: code %q op id %v", errCode(r), r.Meta[idem.MetaOpID])
		}
		if strings.Contains(resultText(r), secret) || strings.Contains(resultText(r), errLostCommit.Error()) {
			t.Errorf("unknown_outcome leaks arguments or the store's error: %q", resultText(r))
		}
		if f.committedNotes() != 0 || f.hooks.Load() != 0 {
			t.Fatalf("a rolled-back commit left a note or ran hooks (%d)", f.hooks.Load())
		}
		// The caller checks with get_operation, then retries with
		// the same op id: it runs once more and commits.
		st := callTool(t, cs, "get_operation", map[string]any{"tool": "add_note", "op_id": "op-unknown"}, nil)
		if b, _ := json.Marshal(st.StructuredContent); !strings.Contains(string(b), "not_committed") {
			t.Fatalf("get_operation after a lost commit: %s", b)
		}
		r = callTool(t, cs, "add_note", args, nil)
		if r.IsError || replayed(r) {
			t.Fatalf("retry after not_committed: %s", resultText(r))
		}
	}
	if got := f.committedNotes(); got != 1 {
		t.Errorf("%d notes committed, want 1", got)
	}
	if r2 := callTool(t, cs, "add_note", args, nil); !replayed(r2) {
		t.Error("a further repeat was not replayed")
	}
}

// mwBusyWhileFirstRuns shows that a duplicate arriving while the first call
// runs is refused with busy and the op id after BusyAfter, and that a repeat
// after the first finished is a replay.
func mwBusyWhileFirstRuns(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	ht := newHeldTool(t, f, 50*time.Millisecond)
	args := map[string]any{"text": "x", "op_id": "op-slow"}
	first := ht.holdFirst(t, args)
	// The duplicate must be refused while the first runs, not wait for
	// it: run it with a bound, and release the first either way.
	r := ht.await(t, ht.send(args), "the duplicate waited for the first call instead of being refused with busy")
	ht.release()
	if r.err != nil || errCode(r.res) != string(idem.CodeBusy) || r.res.Meta[idem.MetaOpID] != "op-slow" {
		t.Errorf("duplicate during the first run: %v, code %q, want busy with the op id", r.err, errCode(r.res))
	}
	if a := <-first; a.err != nil || a.res == nil || a.res.IsError {
		t.Fatalf("first call failed: %v", a.err)
	}
	if r := callTool(t, ht.cs, "slow", args, nil); !replayed(r) || ht.runs.Load() != 1 {
		t.Errorf("after the first finished: replayed=%v runs=%d", replayed(r), ht.runs.Load())
	}
}

// mwDifferentOpsOnOneRecordLoseNothing shows that concurrent different
// operations on one record all land, and their repeats change nothing.
func mwDifferentOpsOnOneRecordLoseNothing(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	k := idem.Key{Collection: "counters", ID: "c"}
	bump := func(ctx context.Context, tx idem.Tx, r mwlib.Request, in mwlib.BumpIn) (*mwlib.ErrorResult, counter, error) {
		var c counter
		v, err := tx.Get(ctx, k, &c)
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			return nil, counter{}, err
		}
		opID, _ := r.Meta()[idem.MetaOpID].(string)
		c.N++
		c.Ops = append(c.Ops, opID)
		if v == 0 {
			err = tx.Create(ctx, k, c)
		} else {
			err = tx.Update(ctx, k, v, c)
		}
		return nil, c, err
	}
	cs := f.serve(mwlib.Tool{Name: "bump", Handler: mwlib.Handler[mwlib.BumpIn, counter](bump),
		Options: []idem.Option{idem.OpID()}}).Connect(t, "")
	n := h.goroutines(16)
	call := func(i int) error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bump", Arguments: map[string]any{},
			Meta: mcp.Meta{idem.MetaOpID: fmt.Sprintf("bump-%02d", i)}})
		if err == nil && res.IsError {
			err = errors.New(resultText(res))
		}
		return err
	}
	errs := make([]error, n)
	start(n, func(i int) { errs[i] = call(i) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("bump %d: %v", i, err)
		}
	}
	for i := range n { // every repeat is a replay: the count stays
		if err := call(i); err != nil {
			t.Fatalf("repeat %d: %v", i, err)
		}
	}
	var got counter
	err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, &got)
		return err
	})
	if err != nil || got.N != n || len(got.Ops) != n {
		t.Errorf("counter after %d different operations and their repeats: %+v, %v", n, got, err)
	}
	// Each operation's handler saw its own op id in _meta.
	slices.Sort(got.Ops)
	for i, op := range got.Ops {
		if want := fmt.Sprintf("bump-%02d", i); op != want {
			t.Errorf("operation %d recorded op id %q, want %q", i, op, want)
		}
	}
}

// mwOpRecordOwnedByScope shows that a call with an op id from an
// authenticated caller stores its op record under the caller's scope as the
// key's Owner (escaped where the scope holds characters an owner may not),
// and that the same op id from another scope is another record.
func mwOpRecordOwnedByScope(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	connect := f.serveHTTP(map[string]string{"tok-alice": "alice", "tok-org": "org/bob%"})
	args := map[string]any{"text": "mine", "op_id": "owned-op"}
	ra := callTool(t, connect("tok-alice"), "scoped_note", args, nil)
	rb := callTool(t, connect("tok-org"), "scoped_note", args, nil)
	if ra.IsError || rb.IsError {
		t.Fatalf("calls failed: %q / %q", resultText(ra), resultText(rb))
	}
	if noteID(t, ra) == noteID(t, rb) {
		t.Fatalf("two scopes got one answer (%s)", noteID(t, ra))
	}
	cases := []struct{ scope, owner, note string }{
		{"alice", "alice", noteID(t, ra)},
		{"org/bob%", "org%2Fbob%25", noteID(t, rb)},
	}
	var keys []idem.Key
	for _, c := range cases {
		k := oprecord.Key(c.scope, "scoped_note", "owned-op")
		if k.Owner != c.owner {
			t.Errorf("op record key of scope %q has Owner %q, want %q", c.scope, k.Owner, c.owner)
		}
		keys = append(keys, k)
		var rec oprecord.Record
		err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, k, &rec)
			return err
		})
		if err != nil {
			t.Fatalf("op record of scope %q under %s: %v", c.scope, k, err)
		}
		var out noteOut
		if err := json.Unmarshal(rec.StructuredOutput(), &out); err != nil || rec.Scope != c.scope || rec.OpID != "owned-op" || out.ID != c.note {
			t.Errorf("op record under %s: scope %q, op id %q, output %s; want %q, owned-op, note %s",
				k, rec.Scope, rec.OpID, rec.StructuredOutput(), c.scope, c.note)
		}
		// Only under its owner: not under the same id without one.
		err = f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, idem.Key{Collection: k.Collection, ID: k.ID}, nil)
			return err
		})
		if !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("op record of scope %q is also stored without an owner: %v", c.scope, err)
		}
	}
	if keys[0] == keys[1] {
		t.Errorf("two scopes' op records share the key %s", keys[0])
	}
}

// mwHandlerErrorIsNotSaved shows how a failing handler is answered: an
// error or an IsError result with code not_saved and the handler's own
// words, a code the handler chose kept, a panic as internal without its
// value; nothing is committed, and a retry runs the handler again.
func mwHandlerErrorIsNotSaved(t *testing.T, h Harness) {
	cases := []struct {
		mode string
		code idem.Code
		text string
	}{
		{failError, idem.CodeNotSaved, "handler failed"},
		{failIsError, idem.CodeNotSaved, "tool failed"},
		{failIsErrorCoded, handlerCode, "tool failed with a code"},
		{failCoded, handlerCode, "handler refused"},
		{failPanic, idem.CodeInternal, "nothing was saved"},
	}
	for _, c := range cases {
		f := newMWFixture(t, h)
		cs := f.connect()
		f.fail.Store(c.mode)
		for i, call := range []struct {
			args map[string]any
			meta mcp.Meta
		}{
			{map[string]any{"text": "x"}, nil},
			{map[string]any{"text": "x", "op_id": "op-fail"}, nil},
			{map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: "op-fail"}},
		} {
			r := callTool(t, cs, "add_note", call.args, call.meta)
			if !r.IsError || errCode(r) != string(c.code) || !strings.Contains(resultText(r), c.text) {
				t.Errorf("%s, call %d: IsError=%v code %q text %q; want code %s and %q", c.mode, i, r.IsError, errCode(r), resultText(r), c.code, c.text)
			}
			if c.mode == failPanic && strings.Contains(resultText(r), "panicked") {
				t.Errorf("panic: the answer tells the panic's value: %q", resultText(r))
			}
			if replayed(r) {
				t.Errorf("%s, call %d: a failed call was answered as a replay", c.mode, i)
			}
			if got := f.execs.Load(); got != int64(i+1) {
				t.Errorf("%s, call %d: handler ran %d times, want %d: every retry runs again", c.mode, i, got, i+1)
			}
		}
		if n := f.committedNotes(); n != 0 || f.opRecord("", "add_note", "op-fail") != nil || f.hooks.Load() != 0 {
			t.Errorf("%s: failed calls committed: %d notes, op record %v, %d hooks", c.mode, n, f.opRecord("", "add_note", "op-fail") != nil, f.hooks.Load())
		}
		f.fail.Store("")
		if r := callTool(t, cs, "add_note", map[string]any{"text": "x", "op_id": "op-fail"}, nil); r.IsError || replayed(r) || f.committedNotes() != 1 {
			t.Errorf("%s: retry once the handler works: IsError=%v replayed=%v, %d notes; want a fresh commit", c.mode, r.IsError, replayed(r), f.committedNotes())
		}
	}
}

// mwSchemaRefusalQuotesNoValue shows that a call whose argument has the
// wrong type is refused with invalid_arguments naming the argument, that the
// value appears nowhere in the answer, and that nothing ran or was written.
func mwSchemaRefusalQuotesNoValue(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	for _, args := range []map[string]any{
		{"text": "x", "priority": secret},
		{"text": "x", "priority": secret, "op_id": "op-schema"},
		{"text": "x", "priority": map[string]any{"v": secret}, "op_id": "op-schema"},
	} {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_note", Arguments: args})
		if err != nil {
			t.Fatalf("%v: protocol error %v, want a tool result", args["op_id"], err)
		}
		if !r.IsError || errCode(r) != string(idem.CodeInvalidArguments) || !strings.Contains(resultText(r), `"priority"`) {
			t.Errorf("wrong type: IsError=%v code %q text %q; want invalid_arguments naming \"priority\"", r.IsError, errCode(r), resultText(r))
		}
		if b, _ := json.Marshal(r); strings.Contains(string(b), secret) {
			t.Errorf("the refusal quotes the value: %s", b)
		}
	}
	if got := f.execs.Load(); got != 0 {
		t.Errorf("handler ran %d times for refused calls", got)
	}
	f.mustNotWrite("op-schema")
	// The same tool takes the argument with its type.
	if r := callTool(t, cs, "add_note", map[string]any{"text": "x", "priority": 3, "op_id": "op-schema"}, nil); r.IsError {
		t.Errorf("a call with an integer priority: %s", resultText(r))
	}
}

// mwNullOpIDRefused shows that an op id that is present but not a string
// (null, a number, an object), as an argument or in _meta, is refused with
// invalid_op_id, quotes nothing, and runs nothing: the caller meant to be
// protected and is not run without it.
func mwNullOpIDRefused(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	cs := f.connect()
	cases := []struct {
		name string
		args map[string]any
		meta mcp.Meta
	}{
		{"null", map[string]any{"text": "x", "op_id": nil}, nil},
		{"number", map[string]any{"text": "x", "op_id": 7}, nil},
		{"object", map[string]any{"text": "x", "op_id": map[string]any{"v": secret}}, nil},
		{"null in _meta", map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: nil}},
		{"number in _meta", map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: 7}},
		{"object in _meta", map[string]any{"text": "x"}, mcp.Meta{idem.MetaOpID: map[string]any{"v": secret}}},
	}
	for _, c := range cases {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_note", Arguments: c.args, Meta: c.meta})
		if err != nil {
			t.Fatalf("%s: protocol error %v, want a tool result", c.name, err)
		}
		if !r.IsError || errCode(r) != string(idem.CodeInvalidOpID) {
			t.Errorf("%s: IsError=%v code %q (%s), want invalid_op_id", c.name, r.IsError, errCode(r), resultText(r))
		}
		if b, _ := json.Marshal(r); strings.Contains(string(b), secret) {
			t.Errorf("%s: the refusal quotes the op id: %s", c.name, b)
		}
	}
	if got := f.execs.Load(); got != 0 {
		t.Errorf("handler ran %d times for refused calls", got)
	}
	f.mustNotWrite("")
}

// mwContendedIsNotBusy shows that a store giving up on a transaction that
// lost too many races is answered contended with the op id, nothing saved,
// and that a retry then commits; and that busy is kept for a call that
// waited BusyAfter for another call with the same op id.
func mwContendedIsNotBusy(t *testing.T, h Harness) {
	f := newMWFixture(t, h)
	gs := &gaveUp{Store: f.store}
	f.store = gs
	cs := f.newServer().Connect(t, "")
	args := map[string]any{"text": secret, "op_id": "op-contended"}
	gs.armed.Store(true)
	r := callTool(t, cs, "add_note", args, nil)
	if errCode(r) != string(idem.CodeContended) || r.Meta[idem.MetaOpID] != "op-contended" {
		t.Fatalf("a store that gave up: code %q op id %v (%s), want contended with the op id", errCode(r), r.Meta[idem.MetaOpID], resultText(r))
	}
	if strings.Contains(resultText(r), secret) || strings.Contains(resultText(r), errGaveUp.Error()) {
		t.Errorf("contended leaks arguments or the store's error: %q", resultText(r))
	}
	if f.execs.Load() != 1 || f.committedNotes() != 0 || f.hooks.Load() != 0 || f.opRecord("", "add_note", "op-contended") != nil {
		t.Fatalf("contended call: %d runs, %d notes, %d hooks; want 1 run and nothing saved", f.execs.Load(), f.committedNotes(), f.hooks.Load())
	}
	if r := callTool(t, cs, "add_note", args, nil); r.IsError || replayed(r) || f.committedNotes() != 1 {
		t.Errorf("retry after contended: %s, replayed=%v, %d notes; want a fresh commit", resultText(r), replayed(r), f.committedNotes())
	}

	const busyAfter = 100 * time.Millisecond
	ht := newHeldTool(t, f, busyAfter)
	held := map[string]any{"text": "x", "op_id": "op-held"}
	first := ht.holdFirst(t, held)
	began := time.Now()
	d := ht.await(t, ht.send(held), "the duplicate was not refused while the first call ran")
	waited := time.Since(began)
	ht.release()
	if d.err != nil || errCode(d.res) != string(idem.CodeBusy) || d.res.Meta[idem.MetaOpID] != "op-held" {
		t.Errorf("duplicate of a running call: %v, code %q, want busy with the op id", d.err, errCode(d.res))
	}
	if waited < busyAfter {
		t.Errorf("the duplicate was refused after %v, before BusyAfter (%v)", waited, busyAfter)
	}
	if a := <-first; a.err != nil || a.res == nil || a.res.IsError {
		t.Fatalf("first call failed: %v", a.err)
	}
}
