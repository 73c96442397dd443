package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemclient"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/argsfp"
	"github.com/idemkit/sdk/store/memory"
)

// secret is an argument value no error may quote.
const secret = "s3cret-value-7731"

type counterIn struct {
	Note string `json:"note"`
}

type statusIn struct {
	Item   string `json:"item"`
	Status string `json:"status"`
}

type count struct {
	N int `json:"n"`
}

// fixture is a server on a memory store whose tools count their runs.
type fixture struct {
	store *memory.Store
	runs  map[string]*atomic.Int64
}

func newFixture() *fixture {
	f := &fixture{store: memory.New(nil), runs: map[string]*atomic.Int64{}}
	for _, n := range []string{"bump", "set", "peek", "fail", "conflicted"} {
		f.runs[n] = new(atomic.Int64)
	}
	return f
}

func (f *fixture) ran(tool string) int64 { return f.runs[tool].Load() }

var counterKey = idem.Key{Collection: "counter", ID: "c"}

// server returns a server on f's store; strip removes every tool's
// annotations from tools/list, as a replacement server that lost them.
func (f *fixture) server(strip bool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "bump", Description: "Add one to a counter."}, f.store,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in counterIn) (*mcp.CallToolResult, count, error) {
			f.runs["bump"].Add(1)
			var c count
			v, err := tx.Get(ctx, counterKey, &c)
			if err != nil && !errors.Is(err, idem.ErrNotFound) {
				return nil, c, err
			}
			c.N++
			if v == 0 {
				return nil, c, tx.Create(ctx, counterKey, c)
			}
			return nil, c, tx.Update(ctx, counterKey, v, c)
		}, idem.OpID())
	idem.AddTool(srv, &mcp.Tool{Name: "set", Description: "Set an item's status."}, f.store,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, statusIn, error) {
			f.runs["set"].Add(1)
			return nil, in, tx.Put(ctx, idem.Key{Collection: "status", ID: in.Item}, in)
		}, idem.RecordKeys("item"))
	idem.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."}, f.store,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, statusIn, error) {
			f.runs["fail"].Add(1)
			return nil, in, errors.New("the item cannot be changed now")
		}, idem.RecordKeys("item"))
	mcp.AddTool(srv, &mcp.Tool{Name: "peek", Description: "Read the counter.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in counterIn) (*mcp.CallToolResult, count, error) {
			f.runs["peek"].Add(1)
			return nil, count{}, nil
		})
	yes := true
	mcp.AddTool(srv, &mcp.Tool{Name: "conflicted", Description: "Claims to be read-only and destructive.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &yes}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in counterIn) (*mcp.CallToolResult, count, error) {
			f.runs["conflicted"].Add(1)
			return nil, count{}, nil
		})
	idem.RegisterStatusTool(srv, f.store)
	if strip {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				res, err := next(ctx, method, req)
				if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					for i, t := range lt.Tools {
						c := *t
						c.Annotations = nil
						lt.Tools[i] = &c
					}
				}
				return res, err
			}
		})
	}
	return srv
}

// client returns a Client whose sessions lose the first count answers of
// tool; the sessions after the first are served by next, when not nil.
func client(t *testing.T, first, next *mcp.Server, tool string, count int, opts *idemclient.Options) (*idemclient.Client, *atomic.Int64) {
	t.Helper()
	d := &idemtest.Dropper{Tool: tool, Count: count}
	var connects atomic.Int64
	c := idemclient.New(func(ctx context.Context) (*mcp.ClientSession, error) {
		srv := first
		if connects.Add(1) > 1 && next != nil {
			srv = next
		}
		return idemtest.Connect(ctx, srv, d.Wrap)
	}, opts)
	t.Cleanup(func() { c.Close() })
	return c, &connects
}

var trusted = &idemclient.Options{Trusted: true}

func unknownOutcome(t *testing.T, err error) *idemclient.UnknownOutcomeError {
	t.Helper()
	var u *idemclient.UnknownOutcomeError
	if !errors.As(err, &u) {
		t.Fatalf("want an *UnknownOutcomeError, got %v", err)
	}
	if strings.Contains(u.Error(), secret) {
		t.Errorf("the message quotes an argument value: %s", u.Error())
	}
	if u.OpID != "" && strings.Contains(u.Error(), u.OpID) {
		t.Errorf("the message quotes the op id: %s", u.Error())
	}
	if len(u.Fingerprint) != 64 {
		t.Errorf("Fingerprint = %q, want 64 hex digits", u.Fingerprint)
	}
	return u
}

// A tool that says idempotentHint: false runs once; the error carries a
// minted op id, and get_operation says the operation committed.
func TestUnsafeToolIsNotSentAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	srv := f.server(false)
	c, _ := client(t, srv, nil, "bump", 1, trusted)
	_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "bump", Arguments: counterIn{Note: secret}})
	u := unknownOutcome(t, err)
	if f.ran("bump") != 1 || u.Sends != 1 {
		t.Fatalf("bump ran %d times, sent %d times; want 1 and 1", f.ran("bump"), u.Sends)
	}
	if u.Tool != "bump" || u.OpID == "" {
		t.Fatalf("error names tool %q and op id %q", u.Tool, u.OpID)
	}
	if u.Err == nil || errors.Unwrap(err) != u.Err {
		t.Errorf("Unwrap does not give the transport's error")
	}
	st, err := c.Reconcile(ctx, u.Tool, u.OpID)
	if err != nil || st != idemclient.Committed {
		t.Fatalf("Reconcile = %q, %v; want committed", st, err)
	}
	st, err = c.Reconcile(ctx, "bump", "never-sent-op")
	if err != nil || st != idemclient.NotCommitted {
		t.Fatalf("Reconcile of an unknown op id = %q, %v; want not_committed", st, err)
	}
	if _, err := c.Reconcile(ctx, "bump", ""); err == nil {
		t.Fatal("Reconcile without an op id gave no error")
	}
}

// An op id the caller sent is kept, in the argument or in _meta.
func TestCallersOpIDIsKept(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	c, _ := client(t, f.server(false), nil, "bump", 2, trusted)
	_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "bump", Arguments: map[string]any{"note": "x", "op_id": "app-1"}})
	if u := unknownOutcome(t, err); u.OpID != "app-1" {
		t.Fatalf("op id = %q, want the caller's", u.OpID)
	}
	_, err = c.CallTool(ctx, &mcp.CallToolParams{Name: "bump", Arguments: map[string]any{"note": "x"}, Meta: mcp.Meta{"io.idemkit/op_id": "app-2"}})
	if u := unknownOutcome(t, err); u.OpID != "app-2" {
		t.Fatalf("op id = %q, want the caller's from _meta", u.OpID)
	}
	if st, err := c.Reconcile(ctx, "bump", "app-2"); err != nil || st != idemclient.Committed {
		t.Fatalf("Reconcile = %q, %v; want committed", st, err)
	}
}

// A keyed tool (idempotentHint: true) on a trusted server is sent once
// more on a new session, and its record is written once.
func TestIdempotentToolIsSentAgainOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	c, connects := client(t, f.server(false), nil, "set", 1, trusted)
	args := statusIn{Item: "ticket-1", Status: secret}
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "set", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("CallTool = %v, %v; want the replay's answer", res, err)
	}
	if f.ran("set") != 2 || connects.Load() != 2 {
		t.Fatalf("set ran %d times on %d sessions; want 2 and 2", f.ran("set"), connects.Load())
	}
	if err := f.store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var got statusIn
		if _, err := tx.Get(ctx, idem.Key{Collection: "status", ID: "ticket-1"}, &got); err != nil {
			return err
		}
		if got != args {
			t.Errorf("stored %+v, want %+v", got, args)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A read-only tool is sent again; a tool that claims read-only and
// destructive is not.
func TestReadOnlyHints(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	c, _ := client(t, f.server(false), nil, "peek", 1, trusted)
	if _, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "peek", Arguments: counterIn{}}); err != nil {
		t.Fatalf("peek: %v", err)
	}
	if f.ran("peek") != 2 {
		t.Fatalf("peek ran %d times, want 2", f.ran("peek"))
	}
	c, _ = client(t, f.server(false), nil, "conflicted", 1, trusted)
	_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "conflicted", Arguments: counterIn{}})
	if u := unknownOutcome(t, err); !strings.Contains(u.Reason, "conflict") || f.ran("conflicted") != 1 {
		t.Fatalf("conflicted ran %d times, reason %q", f.ran("conflicted"), u.Reason)
	}
}

// Without trust, no annotation is relied on.
func TestUntrustedServerGetsNoReplay(t *testing.T) {
	for _, opts := range []*idemclient.Options{nil, {MaxReplays: 3}} {
		f := newFixture()
		c, _ := client(t, f.server(false), nil, "set", 1, opts)
		_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "set", Arguments: statusIn{Item: "a", Status: secret}})
		u := unknownOutcome(t, err)
		if f.ran("set") != 1 || !strings.Contains(u.Reason, "not trusted") {
			t.Fatalf("set ran %d times, reason %q; want 1, not trusted", f.ran("set"), u.Reason)
		}
	}
}

// A replacement server that no longer says idempotentHint gets no replay,
// though the first one said it.
func TestReplacementWithoutAnnotationsGetsNoReplay(t *testing.T) {
	f := newFixture()
	c, connects := client(t, f.server(false), f.server(true), "set", 1, trusted)
	_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "set", Arguments: statusIn{Item: "a", Status: secret}})
	u := unknownOutcome(t, err)
	if f.ran("set") != 1 || connects.Load() != 2 || !strings.Contains(u.Reason, "after reconnecting") {
		t.Fatalf("set ran %d times on %d sessions, reason %q; want 1 on 2, after reconnecting", f.ran("set"), connects.Load(), u.Reason)
	}
}

// At most MaxReplays replays; then the outcome is unknown.
func TestMaxReplays(t *testing.T) {
	f := newFixture()
	c, _ := client(t, f.server(false), nil, "set", 10, &idemclient.Options{Trusted: true, MaxReplays: 3})
	_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "set", Arguments: statusIn{Item: "a", Status: secret}})
	u := unknownOutcome(t, err)
	if u.Sends != 4 || f.ran("set") != 4 {
		t.Fatalf("sent %d times, ran %d; want 4 and 4", u.Sends, f.ran("set"))
	}
}

// A tool result with IsError is an answer: it is returned, not resent.
func TestToolErrorIsAnAnswer(t *testing.T) {
	f := newFixture()
	c, _ := client(t, f.server(false), nil, "none", 1, trusted)
	res, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Arguments: statusIn{Item: "a", Status: "b"}})
	if err != nil || !res.IsError || f.ran("fail") != 1 {
		t.Fatalf("CallTool = %v, %v after %d runs; want an IsError result after 1", res, err, f.ran("fail"))
	}
}

// The fingerprint covers the arguments as sent, less the op id: the same
// arguments give the same fingerprint whatever their order, and the one the
// server computes (argsfp); other arguments another.
func TestFingerprint(t *testing.T) {
	hash := func(args any) string {
		f := newFixture()
		c, _ := client(t, f.server(false), nil, "set", 1, nil)
		_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "set", Arguments: args})
		return unknownOutcome(t, err).Fingerprint
	}
	a := hash(map[string]any{"item": "a", "status": "b"})
	if b := hash(statusIn{Status: "b", Item: "a"}); a != b {
		t.Errorf("same arguments, fingerprints %s and %s", a, b)
	}
	if server, _ := argsfp.Of(json.RawMessage(`{"status":"b","item":"a","op_id":"any"}`)); a != server {
		t.Errorf("fingerprint %s, the server's %s", a, server)
	}
	if b := hash(statusIn{Item: "a", Status: "c"}); a == b {
		t.Error("other arguments, same hash")
	}
}

// The caller's params are not modified, its _meta included.
func TestParamsAreNotModified(t *testing.T) {
	f := newFixture()
	c, _ := client(t, f.server(false), nil, "set", 1, trusted)
	args := map[string]any{"note": "x"}
	meta := mcp.Meta{"app/trace": "t-1"}
	params := &mcp.CallToolParams{Name: "bump", Arguments: args, Meta: meta}
	if _, err := c.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	if len(args) != 1 || len(meta) != 1 || params.Arguments == nil || len(params.Meta) != 1 {
		t.Fatalf("params changed: arguments %v, _meta %v", args, meta)
	}
}

// A JSON-RPC error from the server is an answer: returned as it is, with
// no reconnect; so is a failure to connect, when nothing was sent.
func TestErrorsThatAreNotLostConnections(t *testing.T) {
	f := newFixture()
	c, connects := client(t, f.server(false), nil, "none", 1, trusted)
	_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: counterIn{}})
	var u *idemclient.UnknownOutcomeError
	if err == nil || errors.As(err, &u) || connects.Load() != 1 {
		t.Fatalf("got %v after %d connects; want the server's error after 1", err, connects.Load())
	}
	down := idemclient.New(func(context.Context) (*mcp.ClientSession, error) { return nil, errors.New("no route") }, trusted)
	_, err = down.CallTool(context.Background(), &mcp.CallToolParams{Name: "bump"})
	if err == nil || errors.As(err, &u) {
		t.Fatalf("got %v; want the connect error", err)
	}
}
