package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/guardcases"
	"github.com/idemkit/sdk/internal/trackertest"
	"github.com/idemkit/sdk/store/memory"
)

// tracker is a fake tracker API on loopback that counts the creates it
// gets (trackertest), with the mcp-go tool handlers of a server that wraps
// it.
type tracker struct{ *trackertest.API }

type (
	issue    = trackertest.Issue
	newIssue = trackertest.NewIssue
)

func newTracker(t *testing.T) *tracker { return &tracker{trackertest.New(t)} }

// post creates an issue upstream, forwarding the guard's key.
func (tr *tracker) post(ctx context.Context, in newIssue) (*http.Response, error) {
	body, _ := json.Marshal(in)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, tr.URL+"/issues", strings.NewReader(string(body)))
	if err != nil {
		return nil, idem.NotDone(err) // never sent
	}
	if key, ok := idem.IdempotencyKey(ctx); ok {
		hreq.Header.Set("Idempotency-Key", key)
	}
	return http.DefaultClient.Do(hreq)
}

// createIssue is an mcp-go tool handler as a server that wraps an API
// writes one: its whole effect is one POST.
func (tr *tracker) createIssue(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	title, err := req.RequireString("title")
	if err != nil {
		return mcpgo.NotDone(mcp.NewToolResultError(err.Error())), nil
	}
	resp, err := tr.post(ctx, newIssue{Title: title, Body: req.GetString("body", "")})
	if err != nil {
		return nil, err // may or may not have landed
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return mcpgo.NotDone(mcp.NewToolResultErrorf("the tracker refused the issue (%d)", resp.StatusCode)), nil
	case resp.StatusCode >= 300:
		return mcp.NewToolResultErrorf("the tracker failed (%d)", resp.StatusCode), nil
	}
	var is issue
	if err := json.NewDecoder(resp.Body).Decode(&is); err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructuredOnly(is), nil
}

// addComment is a typed handler, for mcp.NewStructuredToolHandler.
func (tr *tracker) addComment(ctx context.Context, req mcp.CallToolRequest, in newIssue) (issue, error) {
	resp, err := tr.post(ctx, in)
	if err != nil {
		return issue{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return issue{}, fmt.Errorf("the tracker answered %d", resp.StatusCode)
	}
	var is issue
	err = json.NewDecoder(resp.Body).Decode(&is)
	return is, err
}

// findIssue reconciles an unknown create: the issue is there if one has
// the title.
func (tr *tracker) findIssue(ctx context.Context, req mcp.CallToolRequest, p idem.Pending) (*mcp.CallToolResult, error) {
	var in newIssue
	if err := json.Unmarshal(p.Arguments, &in); err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, tr.URL+"/issues", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var all []issue
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, err
	}
	for _, is := range all {
		if is.Title == in.Title {
			return mcp.NewToolResultStructuredOnly(is), nil
		}
	}
	return nil, idem.NotDone(errors.New("no such issue"))
}

// trackerServer is an mcp-go server as people write one: tools registered
// with srv.AddTool and mcp-go's own handlers, unaware of idemkit, and the
// guard added in one line.
func trackerServer(tr *tracker, guard *idem.Guard, tools idem.Tools) *server.MCPServer {
	var sopts []server.ServerOption
	if guard != nil {
		sopts = append(sopts, mcpgo.Guard(guard, tools))
	}
	srv := server.NewMCPServer("tracker", "v1", sopts...)
	srv.AddTool(mcp.NewTool("create_issue", mcp.WithDescription("Create an issue."),
		mcp.WithString("title", mcp.Required()), mcp.WithString("body")), tr.createIssue)
	srv.AddTool(mcp.NewTool("add_comment", mcp.WithDescription("Comment on an issue."), mcp.WithInputSchema[newIssue]()),
		mcp.NewStructuredToolHandler(tr.addComment))
	srv.AddTool(mcp.NewTool("list_issues", mcp.WithDescription("List the issues."), mcp.WithReadOnlyHintAnnotation(true)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("[]"), nil
		})
	return srv
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serveHTTP serves h on loopback until t ends.
func serveHTTP(t *testing.T, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	next := h
	if d, ok := h.(*idemtest.HTTPDropper); ok {
		next = d.Next
	}
	if s, ok := next.(*server.StreamableHTTPServer); ok {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
	}
	return hs.URL
}

// dial connects a new mcp-go client to url over streamable HTTP.
func dial(t *testing.T, ctx context.Context, url string, headers map[string]string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(headers), transport.WithHTTPTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
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
	return c
}

// callTool calls tool with args, which may be raw JSON, and meta.
func callTool(ctx context.Context, c *client.Client, tool string, args any, meta map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	return c.CallTool(ctx, req)
}

func mustCall(t *testing.T, ctx context.Context, c *client.Client, tool string, args any, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(ctx, c, tool, args, meta)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// structuredJSON is res's structured content as JSON, failing on an error
// result.
func structuredJSON(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result: %s", textOf(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The Guard's cases of mwlib, through mcp-go (mcpgoGuard); mwlib says
// what each checks. idem runs them through the go-sdk.

func TestGuardLostAnswer(t *testing.T)     { guardcases.GuardLostAnswer(t, mcpgoGuard{}) }
func TestGuardIdempotencyKey(t *testing.T) { guardcases.GuardIdempotencyKey(t, mcpgoGuard{}) }
func TestGuardConcurrentIdenticalCalls(t *testing.T) {
	guardcases.GuardConcurrentIdenticalCalls(t, mcpgoGuard{})
}
func TestGuardUnknownOutcomeSettled(t *testing.T) {
	guardcases.GuardUnknownOutcomeSettled(t, mcpgoGuard{})
}
func TestGuardReconcileNotDone(t *testing.T) { guardcases.GuardReconcileNotDone(t, mcpgoGuard{}) }

// mcpgoGuard is mcp-go as mwlib's Guard cases run through it: the server
// of trackerServer over streamable HTTP, behind an HTTPDropper, and mcp-go
// clients.
type mcpgoGuard struct{}

func (mcpgoGuard) TrackerServer(t *testing.T, api *trackertest.API, guard *idem.Guard, tools idem.Tools) guardcases.GuardServer {
	d := &idemtest.HTTPDropper{Next: server.NewStreamableHTTPServer(trackerServer(&tracker{api}, guard, tools))}
	return mcpgoTracker{d: d, url: serveHTTP(t, d)}
}

func (mcpgoGuard) Reconcile(api *trackertest.API) idem.Option {
	return mcpgo.Reconcile((&tracker{api}).findIssue)
}

type mcpgoTracker struct {
	d   *idemtest.HTTPDropper
	url string
}

func (s mcpgoTracker) Connect(t *testing.T) guardcases.GuardClient {
	return mcpgoGuardClient{dial(t, ctxFor(t), s.url, nil)}
}

func (s mcpgoTracker) LoseAndRetry(t *testing.T, ctx context.Context, tool string, args map[string]any) guardcases.GuardResult {
	t.Helper()
	s.d.Arm(tool)
	if _, err := callTool(ctx, dial(t, ctx, s.url, nil), tool, args, nil); err == nil {
		t.Fatal("the first call was answered; want its answer lost")
	}
	res := mustCall(t, ctx, dial(t, ctx, s.url, nil), tool, args, nil)
	if s.d.Dropped() != 1 {
		t.Fatalf("%d answers lost, want 1", s.d.Dropped())
	}
	return guardResult(res)
}

type mcpgoGuardClient struct{ c *client.Client }

func (c mcpgoGuardClient) Call(ctx context.Context, tool string, args map[string]any) (guardcases.GuardResult, error) {
	res, err := callTool(ctx, c.c, tool, args, nil)
	if err != nil {
		return guardcases.GuardResult{}, err
	}
	return guardResult(res), nil
}

// guardResult is res as mwlib's Guard cases read it.
func guardResult(res *mcp.CallToolResult) guardcases.GuardResult {
	r := guardcases.GuardResult{IsError: res.IsError, Text: textOf(res)}
	if res.Meta != nil {
		r.Meta = res.Meta.AdditionalFields
	}
	b, _ := json.Marshal(res.StructuredContent)
	r.Structured = string(b)
	return r
}

// TestGuardNotDone: how an mcp-go handler says its failure certainly did
// not happen. After such a failure the repeat runs the handler again; after
// any other, it is answered unknown_outcome and the handler does not run.
func TestGuardNotDone(t *testing.T) {
	for _, c := range []struct {
		name    string
		fail    func() (*mcp.CallToolResult, error)
		notDone bool
	}{
		{"result marked NotDone", func() (*mcp.CallToolResult, error) {
			return mcpgo.NotDone(mcp.NewToolResultError("refused")), nil
		}, true},
		{"error wrapping ErrNotDone", func() (*mcp.CallToolResult, error) { return nil, idem.NotDone(errors.New("refused")) }, true},
		{"URL elicitation", func() (*mcp.CallToolResult, error) {
			return nil, mcp.URLElicitationRequiredError{Elicitations: []mcp.ElicitationParams{}}
		}, true},
		{"error result", func() (*mcp.CallToolResult, error) { return mcp.NewToolResultError("failed"), nil }, false},
		{"error", func() (*mcp.CallToolResult, error) { return nil, errors.New("failed") }, false},
		{"NotDone on a result without IsError", func() (*mcp.CallToolResult, error) {
			return mcpgo.NotDone(mcp.NewToolResultText("refused")), nil
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			var runs atomic.Int64
			srv := server.NewMCPServer("s", "v1", mcpgo.Guard(idem.New(memory.New(nil), nil), idem.Tools{"send": {idem.RequireOpID()}}))
			srv.AddTool(mcp.NewTool("send"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if len(req.GetArguments()) != 0 || string(req.Params.RawArguments) != "{}" {
					t.Errorf("the handler got %v (%s), want its own arguments: none, and no op_id", req.GetArguments(), req.Params.RawArguments)
				}
				if runs.Add(1) == 1 {
					return c.fail()
				}
				return mcp.NewToolResultText("sent"), nil
			})
			srv.AddTool(mcp.NewTool("unguarded"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return c.fail()
			})
			cl := dial(t, ctx, serveHTTP(t, server.NewStreamableHTTPServer(srv)), nil)
			if res, err := callTool(ctx, cl, "unguarded", nil, nil); err == nil && metaOf(res, "io.idemkit/not_done") != nil {
				t.Fatalf("an unguarded tool's answer carries NotDone's mark: %v", res.Meta)
			}
			args := map[string]any{"op_id": "op-1"}
			if first, err := callTool(ctx, cl, "send", args, nil); err == nil {
				if !first.IsError {
					t.Fatalf("first answer: %s, want an error", textOf(first))
				}
				if metaOf(first, "io.idemkit/not_done") != nil {
					t.Fatalf("first answer carries NotDone's mark: %v", first.Meta)
				}
			}
			again := mustCall(t, ctx, cl, "send", args, nil)
			if !c.notDone {
				if runs.Load() != 1 || codeOf(again) != "unknown_outcome" {
					t.Fatalf("%d runs, repeat %v; want 1 run and unknown_outcome", runs.Load(), again.Meta)
				}
				return
			}
			if runs.Load() != 2 || again.IsError || textOf(again) != "sent" {
				t.Fatalf("%d runs, repeat %q error %v; want 2 runs and the second answer", runs.Load(), textOf(again), again.IsError)
			}
		})
	}
}

// TestGuardListsHonestTools: tools/list through the guard says what it
// guarantees, lists get_operation, and leaves the other tools alone.
func TestGuardListsHonestTools(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	srv := trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{
		"create_issue": {idem.OpID()},
		"add_comment":  {idem.RecordKeys("title", "body")},
	})
	c := dial(t, ctx, serveHTTP(t, server.NewStreamableHTTPServer(srv)), nil)
	lr, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tl := range lr.Tools {
		byName[tl.Name] = tl
	}
	ci, ac, li, st := byName["create_issue"], byName["add_comment"], byName["list_issues"], byName["get_operation"]
	if ci.Name == "" || ac.Name == "" || li.Name == "" || st.Name == "" || len(byName) != 4 {
		t.Fatalf("tools listed: %v", lr.Tools)
	}
	hint := func(b *bool) string {
		if b == nil {
			return "absent"
		}
		return fmt.Sprint(*b)
	}
	if hint(ci.Annotations.IdempotentHint) != "false" || hint(ac.Annotations.IdempotentHint) != "true" ||
		hint(st.Annotations.ReadOnlyHint) != "true" || hint(st.Annotations.DestructiveHint) != "false" {
		t.Fatalf("hints: create_issue idempotent %s, add_comment idempotent %s, get_operation read-only %s destructive %s",
			hint(ci.Annotations.IdempotentHint), hint(ac.Annotations.IdempotentHint), hint(st.Annotations.ReadOnlyHint), hint(st.Annotations.DestructiveHint))
	}
	schema, _ := json.Marshal(ci)
	if !strings.Contains(string(schema), `"op_id"`) || !strings.Contains(string(schema), `"title"`) {
		t.Fatalf("create_issue has no op_id or lost its own title: %s", schema)
	}
	if !strings.Contains(ac.Description, "within 24 hours is answered with the first call's answer") {
		t.Fatalf("add_comment's description does not say the trade-off: %q", ac.Description)
	}
	if li.Description != "List the issues." || li.Annotations.IdempotentHint == nil || *li.Annotations.IdempotentHint {
		t.Fatalf("an unguarded tool was changed: %+v", li)
	}
}

// TestGuardSameAsGoSDK: the same tools, guarded with the same options,
// publish the same definitions and give the same coded refusals, word for
// word, on mcp-go as on the go-sdk; none quotes an argument, and nothing
// runs.
func TestGuardSameAsGoSDK(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	tools := idem.Tools{
		"create_issue": {idem.RequireOpID()},
		"add_comment":  {idem.RecordKeys("title", "body")},
	}
	mg := dial(t, ctx, serveHTTP(t, server.NewStreamableHTTPServer(trackerServer(tr, idem.New(memory.New(nil), nil), tools))), nil)

	// The go-sdk twin: the same names and input schemas, raw handlers.
	var gosdkRuns atomic.Int64
	gs := gosdk.NewServer(&gosdk.Implementation{Name: "tracker", Version: "v1"}, nil)
	unguarded := trackerServer(tr, nil, nil)
	for _, name := range []string{"create_issue", "add_comment"} {
		tl := unguarded.GetTool(name).Tool
		schema, _ := json.Marshal(tl.InputSchema)
		if tl.RawInputSchema != nil {
			schema = tl.RawInputSchema
		}
		gs.AddTool(&gosdk.Tool{Name: name, Description: tl.Description, InputSchema: json.RawMessage(schema)},
			func(context.Context, *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
				gosdkRuns.Add(1)
				return &gosdk.CallToolResult{}, nil
			})
	}
	gs.AddReceivingMiddleware(idem.New(memory.New(nil), nil).Middleware(tools))
	gc, err := idemtest.Connect(ctx, gs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()

	mlist, err := mg.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	glist, err := gc.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	published := func(name, desc string, schema any, idempotent bool) string {
		b, _ := json.Marshal(schema)
		var m any
		_ = json.Unmarshal(b, &m)
		b, _ = json.Marshal(m) // sorted keys
		return fmt.Sprintf("%s: %q idempotent %v %s", name, desc, idempotent, b)
	}
	for _, gt := range glist.Tools {
		var mt *mcp.Tool
		for i := range mlist.Tools {
			if mlist.Tools[i].Name == gt.Name {
				mt = &mlist.Tools[i]
			}
		}
		if mt == nil {
			t.Errorf("%s: listed by the go-sdk, not by mcp-go", gt.Name)
			continue
		}
		var mSchema any = mt.InputSchema
		if mt.RawInputSchema != nil {
			mSchema = mt.RawInputSchema
		}
		g := published(gt.Name, gt.Description, gt.InputSchema, gt.Annotations != nil && gt.Annotations.IdempotentHint)
		m := published(mt.Name, mt.Description, mSchema, mt.Annotations.IdempotentHint != nil && *mt.Annotations.IdempotentHint)
		if g != m {
			t.Errorf("published differently:\ngo-sdk %s\nmcp-go %s", g, m)
		}
	}

	const secret = "SECRET-VALUE-42"
	for _, c := range []struct {
		tool string
		args any
		meta map[string]any
		code string
	}{
		{"create_issue", map[string]any{"title": secret}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": secret + " with space"}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": 42}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": "a"}, map[string]any{idem.MetaOpID: "b"}, "invalid_op_id"},
		{"create_issue", map[string]any{"title": 7, "op_id": "op-1"}, nil, "invalid_arguments"},
		{"create_issue", map[string]any{"op_id": "op-1", "body": secret}, nil, "invalid_arguments"},
		{"add_comment", map[string]any{"title": "t", "body": "b", "extra": secret}, nil, "invalid_arguments"},
		{"add_comment", map[string]any{"title": secret}, nil, "missing_key"},
		{"add_comment", map[string]any{"title": secret, "body": ""}, nil, "missing_key"},
		{"add_comment", json.RawMessage(`[1,2]`), nil, "invalid_arguments"},
		{"add_comment", json.RawMessage(`{"title":"\ud800` + secret + `","body":"b"}`), nil, "invalid_arguments"},
		{"get_operation", map[string]any{"tool": secret}, nil, "invalid_op_id"},
		{"get_operation", map[string]any{"op_id": "x", "tool": "t", secret: 1}, nil, "invalid_arguments"},
	} {
		m := mustCall(t, ctx, mg, c.tool, c.args, c.meta)
		if !m.IsError || codeOf(m) != c.code {
			t.Errorf("%s %s: error %v code %q, want %s", c.tool, c.args, m.IsError, codeOf(m), c.code)
		}
		if b, _ := json.Marshal(m); strings.Contains(string(b), "SECRET") {
			t.Errorf("%s: the refusal quotes the arguments: %s", c.tool, b)
		}
		g, err := gc.CallTool(ctx, &gosdk.CallToolParams{Name: c.tool, Arguments: c.args, Meta: c.meta})
		if err != nil {
			t.Fatalf("go-sdk %s: %v", c.tool, err)
		}
		var gtext string
		for _, ct := range g.Content {
			if tc, ok := ct.(*gosdk.TextContent); ok {
				gtext += tc.Text
			}
		}
		if gcode, _ := g.Meta[idem.MetaError].(string); gcode != codeOf(m) || gtext != textOf(m) {
			t.Errorf("%s %s: go-sdk %s %q, mcp-go %s %q", c.tool, c.args, gcode, gtext, codeOf(m), textOf(m))
		}
	}
	if tr.Posts() != 0 || gosdkRuns.Load() != 0 {
		t.Fatalf("%d posts and %d go-sdk runs after bad input, want 0", tr.Posts(), gosdkRuns.Load())
	}
}

// TestGuardPerRequestServer: a server built anew for every HTTP request
// (stateless), its answer lost by the network, makes one create; one
// option, made once, serves every server.
func TestGuardPerRequestServer(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guard := mcpgo.Guard(idem.New(memory.New(nil), nil), idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}})
	var built atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		built.Add(1)
		srv := server.NewMCPServer("tracker", "v1", guard)
		srv.AddTool(mcp.NewTool("add_comment", mcp.WithInputSchema[newIssue]()), mcp.NewStructuredToolHandler(tr.addComment))
		server.NewStreamableHTTPServer(srv, server.WithStateLess(true)).ServeHTTP(w, r)
	})
	d := &idemtest.HTTPDropper{Next: h}
	url := serveHTTP(t, d)
	d.Arm("add_comment")
	args := map[string]any{"title": "LGTM", "body": "ship it"}
	var answers []*mcp.CallToolResult
	for range 2 {
		if res, err := callTool(ctx, dial(t, ctx, url, nil), "add_comment", args, nil); err == nil {
			answers = append(answers, res)
		}
	}
	if d.Dropped() != 1 || len(answers) != 1 || built.Load() < 4 {
		t.Fatalf("dropped %d, answered %d, %d servers built; want 1, 1 and one per request", d.Dropped(), len(answers), built.Load())
	}
	if tr.Created() != 1 || metaOf(answers[0], idem.MetaReplayed) != true {
		t.Fatalf("%d created, retry replayed %v; want 1 and true", tr.Created(), metaOf(answers[0], idem.MetaReplayed))
	}
}

// TestGuardScope: the server's scope, set once, keeps two users' op ids
// apart, upstream keys included, for the tools and for get_operation;
// without it, a caller with an Authorization header is refused an op id.
func TestGuardScope(t *testing.T) {
	ctx := ctxFor(t)
	tools := idem.Tools{"create_issue": {idem.RequireOpID()}}
	bearer := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	t.Run("without Scope", func(t *testing.T) {
		tr := newTracker(t)
		url := serveHTTP(t, server.NewStreamableHTTPServer(trackerServer(tr, idem.New(memory.New(nil), nil), tools)))
		c := dial(t, ctx, url, bearer("alice"))
		for tool, args := range map[string]map[string]any{
			"create_issue":  {"title": "t", "op_id": "op-1"},
			"get_operation": {"tool": "create_issue", "op_id": "op-1"},
		} {
			if res := mustCall(t, ctx, c, tool, args, nil); codeOf(res) != string(idem.CodeScopeRequired) {
				t.Errorf("%s: code %q, want scope_required", tool, codeOf(res))
			}
		}
		if tr.Posts() != 0 {
			t.Fatalf("%d posts, want 0", tr.Posts())
		}
	})
	t.Run("with Scope", func(t *testing.T) {
		tr := newTracker(t)
		opts := &mcpgo.Options{Scope: func(ctx context.Context, req mcp.CallToolRequest) string {
			return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		}}
		url := serveHTTP(t, server.NewStreamableHTTPServer(trackerServer(tr, mcpgo.New(memory.New(nil), nil, opts), tools)))
		var got []string
		for _, user := range []string{"alice", "bob", "alice"} {
			res := mustCall(t, ctx, dial(t, ctx, url, bearer(user)), "create_issue", map[string]any{"title": "from " + user, "op_id": "op-1"}, nil)
			got = append(got, structuredJSON(t, res))
		}
		if tr.Created() != 2 || got[0] != got[2] || got[0] == got[1] {
			t.Fatalf("%d created, answers %q; want 2, alice's repeat answered with hers and bob's his own", tr.Created(), got)
		}
		if k := tr.Keys(); k[0] == k[1] {
			t.Fatalf("alice and bob sent the same upstream key %q", k[0])
		}
		st := mustCall(t, ctx, dial(t, ctx, url, bearer("carol")), "get_operation", map[string]any{"tool": "create_issue", "op_id": "op-1"}, nil)
		if got := structuredJSON(t, st); !strings.Contains(got, `"status":"not_committed"`) {
			t.Fatalf("carol's get_operation of op-1: %s, want not_committed", got)
		}
	})
	t.Run("Scope says none", func(t *testing.T) {
		tr := newTracker(t)
		opts := &mcpgo.Options{Scope: func(context.Context, mcp.CallToolRequest) string { return "" }}
		url := serveHTTP(t, server.NewStreamableHTTPServer(trackerServer(tr, mcpgo.New(memory.New(nil), nil, opts), tools)))
		res := mustCall(t, ctx, dial(t, ctx, url, bearer("shared-key")), "create_issue", map[string]any{"title": "t", "op_id": "op-1"}, nil)
		if got := structuredJSON(t, res); !strings.Contains(got, `"number":1`) {
			t.Fatalf("answer %s, want issue 1: the server's scope says every caller is one", got)
		}
	})
}

// TestGuardOwnsGetOperation: the guard lists and serves get_operation,
// whatever tool of that name the server registers.
func TestGuardOwnsGetOperation(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	srv := trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{"create_issue": {idem.RequireOpID()}})
	srv.AddTool(mcp.NewTool("get_operation", mcp.WithDescription("The server's own.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("the server's own"), nil
	})
	c := dial(t, ctx, serveHTTP(t, server.NewStreamableHTTPServer(srv)), nil)
	lr, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lr.Tools {
		if tl.Name == "get_operation" && !strings.HasPrefix(tl.Description, "Look up whether an operation") {
			t.Errorf("get_operation listed as %q, want the guard's", tl.Description)
		}
	}
	mustCall(t, ctx, c, "create_issue", map[string]any{"title": "t", "op_id": "op-1"}, nil)
	st := mustCall(t, ctx, c, "get_operation", map[string]any{"tool": "create_issue", "op_id": "op-1"}, nil)
	if got := structuredJSON(t, st); !strings.Contains(got, `"status":"committed"`) {
		t.Fatalf("get_operation: %s, want committed", got)
	}
}

// TestAddToolOnAGuardTakesItsScope: an mcp-go server sets who its callers
// are once, in mcpgo.New: a tool registered with mcpgo.AddTool on that
// Guard keeps two users' operations apart by it, where without a scope
// each call with an Authorization header is refused scope_required.
func TestAddToolOnAGuardTakesItsScope(t *testing.T) {
	ctx := ctxFor(t)
	for _, scoped := range []bool{false, true} {
		var mopts *mcpgo.Options
		if scoped {
			mopts = &mcpgo.Options{Scope: func(ctx context.Context, req mcp.CallToolRequest) string {
				return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
			}}
		}
		guard := mcpgo.New(memory.New(nil), nil, mopts)
		runs := 0
		srv := server.NewMCPServer("notes", "v1")
		mcpgo.AddTool(srv, mcp.NewTool("add_note"), guard, func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
			runs++
			return nil, issue{Number: runs}, tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprint(runs)}, in)
		}, idem.RequireOpID())
		url := serveHTTP(t, server.NewStreamableHTTPServer(srv))
		var codes []string
		for _, user := range []string{"alice", "bob"} {
			res := mustCall(t, ctx, dial(t, ctx, url, map[string]string{"Authorization": "Bearer " + user}), "add_note", map[string]any{"title": "t", "op_id": "op-1"}, nil)
			codes = append(codes, codeOf(res))
		}
		switch {
		case !scoped && (codes[0] != "scope_required" || codes[1] != "scope_required" || runs != 0):
			t.Fatalf("without a scope: codes %q, %d runs; want scope_required twice, none", codes, runs)
		case scoped && (codes[0] != "" || codes[1] != "" || runs != 2):
			t.Fatalf("with the Guard's scope: codes %q, %d runs; want 2 runs, one per user", codes, runs)
		}
	}
}
