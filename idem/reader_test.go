package idem_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/internal/oprecord"
	"github.com/idemkit/sdk/store/memory"
)

// windowStore is a memory store whose Read runs a hook after it answered:
// the window between the middleware's Read and its transaction.
type windowStore struct {
	*memory.Store
	afterRead func()
}

func (w *windowStore) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	v, err := w.Store.Read(ctx, k, dst)
	if f := w.afterRead; f != nil {
		w.afterRead = nil
		f()
	}
	return v, err
}

type stopArgs struct {
	Session string `json:"session"`
}

// Two handlers (two processes) on one store. B reads first (ReadFirst) and
// misses; A commits the same op; B's handler then finds the session stopped
// and refuses. B must answer A's stored result, not its own refusal.
func TestDuplicateCommittedAfterReadIsReplayed(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(nil)
	s := &windowStore{Store: mem}
	sk := idem.Key{Collection: "sessions", ID: "s1"}
	if err := mem.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Put(ctx, sk, map[string]string{"state": "running"})
	}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	stop := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		runs++
		var doc map[string]string
		v, err := tx.Get(ctx, sk, &doc)
		if err != nil {
			return nil, nil, err
		}
		if doc["state"] != "running" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no running session"}}}, nil, nil
		}
		if err := tx.Update(ctx, sk, v, map[string]string{"state": "stopped"}); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stopped"}}}, nil, nil
	}
	hA, hB := idem.DirectTool(s, stop, idem.OpID()), idem.DirectTool(s, stop, idem.OpID(), idem.ReadFirst())
	req := func() *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "stop", Arguments: json.RawMessage(`{"session":"s1","op_id":"op-1"}`)}}
	}
	s.afterRead = func() {
		if res, _, err := hA(ctx, req(), stopArgs{Session: "s1"}); err != nil || res.IsError {
			t.Fatalf("A: %v %+v", err, res)
		}
	}
	resB, _, err := hB(ctx, req(), stopArgs{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.afterRead != nil {
		t.Fatal("B did not read first")
	}
	if resB.IsError || resB.Meta[idem.MetaReplayed] != true || mustJSON(resB.Content) != `[{"type":"text","text":"stopped"}]` {
		t.Errorf("B answered %s, want A's stored result, replayed", mustJSON(resB))
	}
}

// countingStore counts the middleware's reads outside transactions.
type countingStore struct {
	*memory.Store
	reads int
}

func (c *countingStore) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	c.reads++
	return c.Store.Read(ctx, k, dst)
}

// A first call skips the read before its transaction; a repeat through the
// same handler, and every call with ReadFirst, reads first and is answered
// by that read.
func TestReadBeforeRunOnlyForRecentOps(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: memory.New(nil)}
	runs := 0
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, tx.Put(ctx, idem.Key{Collection: "c", ID: in.Session}, map[string]int{"runs": runs})
	}
	call := func(tool mcp.ToolHandlerFor[stopArgs, any], op string) *mcp.CallToolResult {
		t.Helper()
		res, _, err := tool(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(`{"session":"s","op_id":"` + op + `"}`)}}, stopArgs{Session: "s"})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %s", err, mustJSON(res))
		}
		return res
	}
	tool := idem.DirectTool(s, h, idem.OpID())
	call(tool, "op-1")
	if s.reads != 0 {
		t.Errorf("first call read the op record %d times before its transaction, want 0", s.reads)
	}
	if res := call(tool, "op-1"); res.Meta[idem.MetaReplayed] != true || s.reads != 1 || runs != 1 {
		t.Errorf("repeat: replayed=%v reads=%d runs=%d, want true 1 1", res.Meta[idem.MetaReplayed], s.reads, runs)
	}
	first := idem.DirectTool(s, h, idem.OpID(), idem.ReadFirst())
	call(first, "op-2")
	if s.reads != 2 || runs != 2 {
		t.Errorf("ReadFirst: reads=%d runs=%d, want 2 2", s.reads, runs)
	}
}

// A handler that has not answered an op skips the read, runs, and finds at
// commit that another process stored the op: the op record's create refuses
// it, nothing of the attempt commits, and the retry replays the stored
// result.
func TestDuplicateFromElsewhereIsCaughtAtCommit(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: memory.New(nil)}
	k := idem.Key{Collection: "c", ID: "s"}
	runs := 0
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		runs++
		// A blind write: it succeeds whether or not the op ran before.
		if err := tx.Put(ctx, k, map[string]int{"run": runs}); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("run ", runs)}}}, nil, nil
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(`{"session":"s","op_id":"op-1"}`)}}
	hA, hB := idem.DirectTool(s, h, idem.OpID()), idem.DirectTool(s, h, idem.OpID())
	if res, _, err := hA(ctx, req, stopArgs{Session: "s"}); err != nil || res.IsError {
		t.Fatalf("A: %v %s", err, mustJSON(res))
	}
	res, _, err := hB(ctx, req, stopArgs{Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta[idem.MetaReplayed] != true || mustJSON(res.Content) != `[{"type":"text","text":"run 1"}]` {
		t.Errorf("B answered %s, want A's stored result, replayed", mustJSON(res))
	}
	var doc map[string]int
	if _, err := s.Read(ctx, k, &doc); err != nil || doc["run"] != 1 {
		t.Errorf("stored %v (%v), want the first run's write only", doc, err)
	}
	if runs != 2 {
		t.Errorf("handler ran %d times, want 2 (A, and B's rolled-back attempt)", runs)
	}
}

// pgLikeStore is a memory store that honours CreateAtCommit the way the
// PostgreSQL store does (the create goes out with the COMMIT), and can lose
// the connection while that batch is in flight: the server refused the
// create (a live record was there), nothing committed, but the client only
// learns ErrUnknownOutcome.
type pgLikeStore struct {
	*memory.Store
	loseCommit bool
}

type deferredCreate struct {
	k    idem.Key
	doc  any
	opts []backend.WriteOption
}

type deferTx struct {
	idem.Tx
	pending []deferredCreate
}

func (t *deferTx) Create(ctx context.Context, k idem.Key, doc any, opts ...backend.WriteOption) error {
	if backend.ApplyWriteOptions(opts).AtCommit {
		t.pending = append(t.pending, deferredCreate{k, doc, opts})
		return nil
	}
	return t.Tx.Create(ctx, k, doc, opts...)
}

var errLost = errors.New("connection lost during commit")

func (s *pgLikeStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	err := s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		dt := &deferTx{Tx: tx}
		if err := fn(ctx, dt); err != nil {
			return err
		}
		for _, p := range dt.pending {
			if err := tx.Create(ctx, p.k, p.doc, p.opts...); errors.Is(err, idem.ErrExists) {
				if s.loseCommit {
					return errLost
				}
				return fmt.Errorf("%w: live document", idem.ErrConflict)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errLost) {
		return fmt.Errorf("%w: %w", idem.ErrUnknownOutcome, err)
	}
	return err
}

// A repeat reaching another process (a handler that has not answered the op)
// skips the read, runs the handler, and its commit, refused because the first
// call's op record is there, ends in an unknown outcome. The lookup finds the
// first call's record (same fingerprint) but not this attempt's: the answer
// is a replay and this attempt's AfterCommit hooks do not run. With
// ReadFirst the repeat is a plain replay.
func TestRepeatElsewhereWithUnknownOutcomeIsAReplay(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("ReadFirst=", readFirst), func(t *testing.T) {
			ctx := context.Background()
			s := &pgLikeStore{Store: memory.New(nil)}
			hooks, runs := 0, 0
			h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
				runs++
				if !idem.AfterCommit(ctx, func(context.Context) { hooks++ }) {
					return nil, nil, errors.New("no transaction")
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil, tx.Put(ctx, idem.Key{Collection: "c", ID: "x"}, map[string]int{"n": runs})
			}
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "send", Arguments: json.RawMessage(`{"session":"s","op_id":"op-1"}`)}}
			hA := idem.DirectTool(s, h, idem.OpID())
			var opts = []idem.Option{idem.OpID()}
			if readFirst {
				opts = append(opts, idem.ReadFirst())
			}
			hB := idem.DirectTool(s, h, opts...)
			if _, _, err := hA(ctx, req, stopArgs{Session: "s"}); err != nil {
				t.Fatal(err)
			}
			s.loseCommit = true
			res, _, err := hB(ctx, req, stopArgs{Session: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if hooks != 1 {
				t.Errorf("after-commit hooks ran %d times for one committed op, want 1 (handler ran %d times)", hooks, runs)
			}
			if res.Meta[idem.MetaReplayed] != true {
				t.Errorf("repeat answered %s, not marked replayed", mustJSON(res))
			}
		})
	}
}

// A repeat whose arguments differ only in member order and white space
// replays; one with another value, or a number spelled another way, is
// key_reused.
func TestRepeatMatchesByFingerprintWhenBytesDiffer(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	runs := 0
	tool := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, any, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("run ", runs)}}}, nil, nil
	}, idem.OpID())
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, _, err := tool(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(args)}}, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	call(`{"a":1,"b":2,"op_id":"o"}`)
	if res := call(` { "op_id" : "o", "b" : 2, "a" : 1 } `); res.IsError || res.Meta[idem.MetaReplayed] != true || runs != 1 {
		t.Errorf("reordered arguments: %s, handler ran %d times; want a replay", mustJSON(res), runs)
	}
	for _, other := range []string{`{"a":1,"b":3,"op_id":"o"}`, `{"a":1,"b":2.0,"op_id":"o"}`} {
		if res := call(other); res.Meta[idem.MetaError] != string(idem.CodeKeyReused) || runs != 1 {
			t.Errorf("%s: %s, handler ran %d times; want key_reused", other, mustJSON(res), runs)
		}
	}
}

// Arguments that cannot be read (or fingerprinted) are refused before the
// handler runs, whether or not the op record is read first.
func TestUnfingerprintableArgsNeverRunTheHandler(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		runs := 0
		opts := []idem.Option{idem.OpID()}
		if readFirst {
			opts = append(opts, idem.ReadFirst())
		}
		tool := idem.DirectTool(memory.New(nil), func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, any, error) {
			runs++
			return &mcp.CallToolResult{}, nil, nil
		}, opts...)
		args := `{"a":1e400,"op_id":"o"}` // beyond a double: RFC 8785 refuses it
		res, _, err := tool(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(args)}}, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if runs != 0 || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) {
			t.Errorf("ReadFirst=%v: handler ran %d times, answer %s; want no run, invalid_arguments", readFirst, runs, mustJSON(res))
		}
	}
}

// A panic is logged with the call's fingerprint, whether or not the op
// record is read first.
func TestPanicLogCarriesFingerprint(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		var buf bytes.Buffer
		opts := []idem.Option{idem.OpID()}
		if readFirst {
			opts = append(opts, idem.ReadFirst())
		}
		guard := idem.New(memory.New(nil), &idem.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		tool := idem.DirectTool(guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, any, error) {
			panic("boom")
		}, opts...)
		args := `{"a":1,"op_id":"o"}`
		if _, _, err := tool(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(args)}}, json.RawMessage(args)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), `"fingerprint":"`) {
			t.Errorf("ReadFirst=%v: panic log has no fingerprint: %s", readFirst, buf.String())
		}
	}
}

// A repeat with other arguments that reaches another process, whose commit
// is refused and whose reply is lost, finds a record of other arguments:
// its own cannot have been created beside it, so the answer is key_reused,
// not unknown_outcome.
func TestUnknownOutcomeBesideOtherArgumentsIsKeyReused(t *testing.T) {
	ctx := context.Background()
	s := &pgLikeStore{Store: memory.New(nil)}
	hooks := 0
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		if !idem.AfterCommit(ctx, func(context.Context) { hooks++ }) {
			return nil, nil, errors.New("no transaction")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent " + in.Session}}}, nil, nil
	}
	req := func(session string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "send", Arguments: json.RawMessage(`{"session":"` + session + `","op_id":"op-1"}`)}}
	}
	if _, _, err := idem.DirectTool(s, h, idem.OpID())(ctx, req("a"), stopArgs{Session: "a"}); err != nil {
		t.Fatal(err)
	}
	s.loseCommit = true
	res, _, err := idem.DirectTool(s, h, idem.OpID())(ctx, req("b"), stopArgs{Session: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Meta[idem.MetaError] != string(idem.CodeKeyReused) || hooks != 1 {
		t.Errorf("answer %s, hooks ran %d times; want key_reused and 1", mustJSON(res), hooks)
	}
}

// A caller whose token carries no user id would share the empty scope with
// every other such caller: calls with an op id are refused with
// scope_required (unless the server chose its own Scope); calls without one
// do not need a scope.
func TestTokenWithoutUserIDIsRefused(t *testing.T) {
	ctx := context.Background()
	runs := 0
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	req := func(args string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{
			Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(args)},
			Extra:  &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{Scopes: []string{"notes"}}},
		}
	}
	tool := idem.DirectTool(memory.New(nil), h, idem.OpID())
	res, _, err := tool(ctx, req(`{"session":"s","op_id":"op-1"}`), stopArgs{Session: "s"})
	if err != nil || res.Meta[idem.MetaError] != string(idem.CodeScopeRequired) || runs != 0 {
		t.Errorf("op call: %v %s, handler ran %d times; want scope_required and no run", err, mustJSON(res), runs)
	}
	if res, _, err := tool(ctx, req(`{"session":"s"}`), stopArgs{Session: "s"}); err != nil || res.IsError || runs != 1 {
		t.Errorf("call without an op id: %v %s; want it run", err, mustJSON(res))
	}
	own := idem.DirectTool(idem.New(memory.New(nil), &idem.Options{Scope: func(context.Context, *mcp.CallToolRequest) string { return "" }}), h, idem.OpID())
	if res, _, err := own(ctx, req(`{"session":"s","op_id":"op-1"}`), stopArgs{Session: "s"}); err != nil || res.IsError || runs != 2 {
		t.Errorf("own Scope: %v %s; want it run", err, mustJSON(res))
	}
}

// A handler that panics on an attempt answered from a duplicate's record is
// still logged.
func TestPanicOnRepeatElsewhereIsLogged(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	panics := false
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		if panics {
			panic("boom")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(`{"session":"s","op_id":"op-1"}`)}}
	if _, _, err := idem.DirectTool(s, h, idem.OpID())(ctx, req, stopArgs{Session: "s"}); err != nil {
		t.Fatal(err)
	}
	panics = true
	var buf bytes.Buffer
	res, _, err := idem.DirectTool(idem.New(s, &idem.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}), h, idem.OpID())(ctx, req, stopArgs{Session: "s"})
	if err != nil || res.Meta[idem.MetaReplayed] != true {
		t.Fatalf("repeat: %v %s, want a replay", err, mustJSON(res))
	}
	if !strings.Contains(buf.String(), "panicked") {
		t.Errorf("the handler panicked and nothing was logged: %q", buf.String())
	}
}

// A record an earlier version wrote, within its TTL, holds the hash of the
// handler's decoded arguments (args_hash) and a fingerprint of another
// form: a repeat with the same arguments replays it, and one with other
// arguments is key_reused.
func TestRecordOfAnEarlierVersion(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	type in struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	decoded, _ := json.Marshal(in{A: 1, B: "x"})
	sum := sha256.Sum256(decoded)
	now := time.Now()
	rec := &oprecord.Record{Tool: "t", OpID: "old-op", Fingerprint: "an-earlier-form", ArgsHash: hex.EncodeToString(sum[:]),
		Result: json.RawMessage(`{"content":[{"type":"text","text":"the first answer"}]}`), CommittedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Create(ctx, oprecord.Key("", "t", "old-op"), rec, backend.WithExpiry(rec.ExpiresAt))
	}); err != nil {
		t.Fatal(err)
	}
	tool := idem.DirectTool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}, idem.OpID())
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, _, err := tool(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t", Arguments: json.RawMessage(args)}}, in{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(`{"b":"x","a":1,"op_id":"old-op"}`); res.Meta[idem.MetaReplayed] != true || !strings.Contains(mustJSON(res), "the first answer") {
		t.Errorf("the same arguments: %s, want the stored answer", mustJSON(res))
	}
	if res := call(`{"a":2,"b":"x","op_id":"old-op"}`); res.Meta[idem.MetaError] != string(idem.CodeKeyReused) {
		t.Errorf("other arguments: %s, want key_reused", mustJSON(res))
	}
}
