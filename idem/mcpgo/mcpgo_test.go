package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/store/memory"
)

// secret is an argument value no refusal may quote.
const secret = "SECRET-41c7"

type noteIn struct {
	Text string `json:"text"`
}

type noteOut struct {
	ID string `json:"id"`
	N  int64  `json:"n"`
}

type labelIn struct {
	Handle string `json:"handle"`
	Label  string `json:"label"`
}

// fixture is an mcp-go server with idem tools on a memory store.
type fixture struct {
	store idem.Store
	srv   *server.MCPServer
	runs  atomic.Int64 // add_note handler runs
	fail  atomic.Value // string: "", "error", "iserror"
}

func newFixture(t *testing.T, mopts *mcpgo.Options) *fixture {
	t.Helper()
	mem := memory.New(nil)
	f := &fixture{store: mcpgo.New(mem, nil, mopts), srv: server.NewMCPServer("notes", "v1")}
	t.Cleanup(func() { mem.Close() })
	f.fail.Store("")
	mcpgo.AddTool(f.srv, mcp.NewTool("add_note", mcp.WithDescription("Add a note.")), f.store,
		func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteOut, error) {
			n := f.runs.Add(1)
			switch f.fail.Load() {
			case "error":
				return nil, noteOut{}, errors.New("the notebook is full")
			case "iserror":
				return mcp.NewToolResultError("the notebook is full"), noteOut{}, nil
			}
			id := fmt.Sprintf("note-%d", n)
			return nil, noteOut{ID: id, N: n}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.RequireOpID())
	mcpgo.AddTool(f.srv, mcp.NewTool("set_label", mcp.WithDescription("Set a label.")), f.store,
		func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in labelIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, tx.Put(ctx, idem.Key{Collection: "labels", ID: in.Handle}, in)
		}, idem.RecordKeys("handle"))
	mcpgo.AddTool(f.srv, mcp.NewTool("log_visit", mcp.WithDescription("Log a visit.")), f.store,
		func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		}, idem.OpID())
	mcpgo.RegisterStatusTool(f.srv, f.store)
	return f
}

func (f *fixture) connect(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(f.srv)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	return c
}

func start(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "v1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, c *client.Client, tool string, args map[string]any, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func metaOf(res *mcp.CallToolResult, key string) any {
	if res.Meta == nil {
		return nil
	}
	return res.Meta.AdditionalFields[key]
}

func codeOf(res *mcp.CallToolResult) string {
	code, _ := metaOf(res, idem.MetaError).(string)
	return code
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, res *mcp.CallToolResult) noteOut {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out noteOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

func TestSameOpIDRunsOnceAndReplays(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect(t)
	r1 := call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
	r2 := call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
	r3 := call(t, f.connect(t), "add_note", map[string]any{"text": "hi"}, map[string]any{idem.MetaOpID: "op-1"})
	if got := f.runs.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	for i, r := range []*mcp.CallToolResult{r1, r2, r3} {
		if r.IsError {
			t.Fatalf("call %d refused: %s", i+1, textOf(r))
		}
		if out := structured(t, r); out != (noteOut{ID: "note-1", N: 1}) {
			t.Errorf("call %d: output %+v, want note-1", i+1, out)
		}
		if textOf(r) != textOf(r1) {
			t.Errorf("call %d: text %q, want the first's %q", i+1, textOf(r), textOf(r1))
		}
		if replayed, _ := metaOf(r, idem.MetaReplayed).(bool); replayed != (i > 0) {
			t.Errorf("call %d: replayed %v", i+1, replayed)
		}
	}
	// A new op id is a new operation.
	call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-2"}, nil)
	if got := f.runs.Load(); got != 2 {
		t.Errorf("handler ran %d times after a second op id, want 2", got)
	}
}

func TestRefusalsAreCodedAndQuoteNothing(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect(t)
	call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		meta map[string]any
		want idem.Code
	}{
		{"no op id", "add_note", map[string]any{"text": secret}, nil, idem.CodeInvalidOpID},
		{"op id not a string", "add_note", map[string]any{"text": secret, "op_id": 7}, nil, idem.CodeInvalidOpID},
		{"op ids differ", "add_note", map[string]any{"text": secret, "op_id": "a"}, map[string]any{idem.MetaOpID: "b"}, idem.CodeInvalidOpID},
		{"op id reused", "add_note", map[string]any{"text": secret, "op_id": "op-1"}, nil, idem.CodeKeyReused},
		{"wrong type", "add_note", map[string]any{"text": 5, "op_id": secret}, nil, idem.CodeInvalidArguments},
		{"unknown argument", "add_note", map[string]any{"text": "x", secret: 1, "op_id": "op-9"}, nil, idem.CodeInvalidArguments},
		{"missing key", "set_label", map[string]any{"label": secret}, nil, idem.CodeMissingKey},
		{"empty key", "set_label", map[string]any{"handle": "", "label": secret}, nil, idem.CodeMissingKey},
		{"lookup without op id", "get_operation", map[string]any{"tool": secret}, nil, idem.CodeInvalidOpID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, c, tc.tool, tc.args, tc.meta)
			if !res.IsError || codeOf(res) != string(tc.want) {
				t.Fatalf("isError %v, code %q; want %q", res.IsError, codeOf(res), tc.want)
			}
			if b, _ := json.Marshal(res); strings.Contains(string(b), secret) {
				t.Errorf("the refusal quotes the caller's value: %s", b)
			}
		})
	}
	if got := f.runs.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1: no refusal runs it", got)
	}
}

func TestHandlerErrorsAreNotSaved(t *testing.T) {
	for _, mode := range []string{"error", "iserror"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, nil)
			c := f.connect(t)
			f.fail.Store(mode)
			res := call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
			if !res.IsError || codeOf(res) != string(idem.CodeNotSaved) {
				t.Fatalf("isError %v, code %q; want not_saved", res.IsError, codeOf(res))
			}
			f.fail.Store("")
			res = call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
			if res.IsError || f.runs.Load() != 2 {
				t.Fatalf("the retry: isError %v after %d runs; want it to run again and succeed", res.IsError, f.runs.Load())
			}
		})
	}
}

func TestGetOperation(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect(t)
	first := call(t, c, "add_note", map[string]any{"text": "hi", "op_id": "op-1"}, nil)
	res := call(t, c, "get_operation", map[string]any{"tool": "add_note", "op_id": "op-1"}, nil)
	var st struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &st); err != nil || st.Status != "committed" {
		t.Fatalf("get_operation: %s (%v), want committed", b, err)
	}
	want, _ := json.Marshal(first.StructuredContent)
	if string(st.Output) != string(want) {
		t.Errorf("output %s, want the first answer's %s", st.Output, want)
	}
	res = call(t, c, "get_operation", map[string]any{"tool": "add_note", "op_id": "op-2"}, nil)
	b, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"not_committed"`) {
		t.Errorf("get_operation of an unknown op id: %s, want not_committed", b)
	}
}

func TestPublishedTools(t *testing.T) {
	f := newFixture(t, nil)
	c := f.connect(t)
	list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]mcp.Tool{}
	for _, tl := range list.Tools {
		tools[tl.Name] = tl
	}
	for name, want := range map[string]bool{"add_note": true, "set_label": true, "log_visit": false, "get_operation": true} {
		tl, ok := tools[name]
		if !ok {
			t.Fatalf("%s not listed", name)
		}
		if h := tl.Annotations.IdempotentHint; h == nil || *h != want {
			t.Errorf("%s: idempotentHint %v, want %v", name, h, want)
		}
	}
	// get_operation reads the store alone: an absent openWorldHint would
	// say it reaches the outside world.
	if h := tools["get_operation"].Annotations.OpenWorldHint; h == nil || *h {
		t.Errorf("get_operation: openWorldHint %v, want false", h)
	}
	b, _ := json.Marshal(tools["add_note"].InputSchema)
	schema := string(b)
	if !strings.Contains(schema, `"op_id"`) || !strings.Contains(schema, `"required":["text","op_id"]`) {
		t.Errorf("add_note's input schema %s lacks a required op_id", schema)
	}
	if d := tools["set_label"].Description; !strings.Contains(d, `Safe to retry with the same "handle"`) {
		t.Errorf("set_label's description %q has no retry note", d)
	}
	if d := tools["log_visit"].Description; !strings.Contains(d, "A repeat may act again") {
		t.Errorf("log_visit's description %q does not say a repeat may act again", d)
	}
}

// An mcp-go server has no authenticated user: over HTTP with an
// Authorization header, an op id needs Scope.
func TestScopeOverHTTP(t *testing.T) {
	callAs := func(t *testing.T, f *fixture, token, opID string) *mcp.CallToolResult {
		hs := httptest.NewServer(server.NewStreamableHTTPServer(f.srv))
		t.Cleanup(hs.Close)
		c, err := client.NewStreamableHttpClient(hs.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
		if err != nil {
			t.Fatal(err)
		}
		start(t, c)
		return call(t, c, "add_note", map[string]any{"text": "hi", "op_id": opID}, nil)
	}
	t.Run("without Scope", func(t *testing.T) {
		f := newFixture(t, nil)
		if res := callAs(t, f, "alice", "op-1"); codeOf(res) != string(idem.CodeScopeRequired) {
			t.Fatalf("code %q, want scope_required", codeOf(res))
		}
	})
	t.Run("with Scope", func(t *testing.T) {
		f := newFixture(t, &mcpgo.Options{Scope: func(ctx context.Context, req mcp.CallToolRequest) string {
			return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		}})
		a := callAs(t, f, "alice", "op-1")
		b := callAs(t, f, "bob", "op-1")
		if a.IsError || b.IsError {
			t.Fatalf("refused: %s %s", textOf(a), textOf(b))
		}
		if structured(t, a) == structured(t, b) || f.runs.Load() != 2 {
			t.Errorf("two users' op-1 ran %d times and answered %+v and %+v: one user got the other's result", f.runs.Load(), structured(t, a), structured(t, b))
		}
	})
}

func TestQueued(t *testing.T) {
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"session_id": "s1"}
	if mcpgo.Queued(req) {
		t.Error("a call without an op id counts as queued")
	}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{idem.MetaOpID: "op-1"}}
	if !mcpgo.Queued(req) {
		t.Error("a call with an op id in _meta does not count as queued")
	}
}
