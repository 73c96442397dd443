package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/guardcases"
	"github.com/idemkit/sdk/internal/trackertest"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// tracker is a fake tracker API on loopback that counts the creates it
// gets (trackertest), with the tool handlers of a server that wraps it.
type tracker struct{ *trackertest.API }

type (
	issue    = trackertest.Issue
	newIssue = trackertest.NewIssue
)

func newTracker(t *testing.T) *tracker { return &tracker{trackertest.New(t)} }

// createIssue is a tool handler as a server that wraps an API writes one:
// its whole effect is one POST, and it forwards the guard's key.
func (tr *tracker) createIssue(ctx context.Context, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
	body, _ := json.Marshal(in)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, tr.URL+"/issues", strings.NewReader(string(body)))
	if key, ok := idem.IdempotencyKey(ctx); ok {
		hreq.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return nil, issue{}, err // may or may not have landed
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, issue{}, idem.NotDone(fmt.Errorf("the tracker refused the issue (%d)", resp.StatusCode))
	case resp.StatusCode >= 300:
		return nil, issue{}, fmt.Errorf("the tracker failed (%d)", resp.StatusCode)
	}
	var is issue
	err = json.NewDecoder(resp.Body).Decode(&is)
	return nil, is, err
}

// findIssue reconciles an unknown create: the issue is there if one has
// the title.
func (tr *tracker) findIssue(ctx context.Context, req *mcp.CallToolRequest, p idem.Pending) (*mcp.CallToolResult, error) {
	var in newIssue
	if err := json.Unmarshal(p.Arguments, &in); err != nil {
		return nil, err
	}
	resp, err := http.Get(tr.URL + "/issues")
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
			b, _ := json.Marshal(is)
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		}
	}
	return nil, idem.NotDone(errors.New("no such issue"))
}

// trackerServer is a server as people write one: tools registered with
// mcp.AddTool, unaware of idemkit, and the guard added in one line.
func trackerServer(tr *tracker, guard *idem.Guard, tools idem.Tools) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue", Description: "Create an issue."}, tr.createIssue)
	mcp.AddTool(srv, &mcp.Tool{Name: "add_comment", Description: "Comment on an issue."}, tr.createIssue)
	if guard != nil {
		srv.AddReceivingMiddleware(guard.Middleware(tools))
	}
	return srv
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func call(name string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}

func structured(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result: %v", textOf(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func codeOf(res *mcp.CallToolResult) string {
	c, _ := res.Meta[idem.MetaError].(string)
	return c
}

// The Guard's cases of mwlib, through the go-sdk (goSDKGuard); mwlib
// says what each checks. idem/mcpgo runs them through mcp-go.

func TestGuardLostAnswer(t *testing.T)     { guardcases.GuardLostAnswer(t, goSDKGuard{}) }
func TestGuardIdempotencyKey(t *testing.T) { guardcases.GuardIdempotencyKey(t, goSDKGuard{}) }
func TestGuardConcurrentIdenticalCalls(t *testing.T) {
	guardcases.GuardConcurrentIdenticalCalls(t, goSDKGuard{})
}
func TestGuardUnknownOutcomeSettled(t *testing.T) {
	guardcases.GuardUnknownOutcomeSettled(t, goSDKGuard{})
}
func TestGuardReconcileNotDone(t *testing.T) { guardcases.GuardReconcileNotDone(t, goSDKGuard{}) }

// goSDKGuard is the go-sdk as mwlib's Guard cases run through it: the
// server of trackerServer, clients connected in memory.
type goSDKGuard struct{}

func (goSDKGuard) TrackerServer(t *testing.T, api *trackertest.API, guard *idem.Guard, tools idem.Tools) guardcases.GuardServer {
	return goSDKTracker{trackerServer(&tracker{api}, guard, tools)}
}

func (goSDKGuard) Reconcile(api *trackertest.API) idem.Option {
	return idem.Reconcile((&tracker{api}).findIssue)
}

type goSDKTracker struct{ srv *mcp.Server }

func (s goSDKTracker) Connect(t *testing.T) guardcases.GuardClient {
	return goSDKGuardClient{connect(t, s.srv)}
}

func (s goSDKTracker) LoseAndRetry(t *testing.T, ctx context.Context, tool string, args map[string]any) guardcases.GuardResult {
	t.Helper()
	res, err := idemtest.DropAndRetry(ctx, s.srv, call(tool, args))
	if err != nil {
		t.Fatal(err)
	}
	return guardResult(res)
}

type goSDKGuardClient struct{ cs *mcp.ClientSession }

func (c goSDKGuardClient) Call(ctx context.Context, tool string, args map[string]any) (guardcases.GuardResult, error) {
	res, err := c.cs.CallTool(ctx, call(tool, args))
	if err != nil {
		return guardcases.GuardResult{}, err
	}
	return guardResult(res), nil
}

// guardResult is res as mwlib's Guard cases read it.
func guardResult(res *mcp.CallToolResult) guardcases.GuardResult {
	b, _ := json.Marshal(res.StructuredContent)
	return guardcases.GuardResult{IsError: res.IsError, Meta: res.Meta, Structured: string(b), Text: textOf(res)}
}

// TestGuardListsHonestTools: tools/list through the guard says what it
// guarantees, and lists get_operation.
func TestGuardListsHonestTools(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	srv := trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{
		"create_issue": {idem.OpID()},
		"add_comment":  {idem.RecordKeys("title", "body")},
	})
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range lr.Tools {
		byName[tl.Name] = tl
	}
	ci, ac, st := byName["create_issue"], byName["add_comment"], byName["get_operation"]
	if ci == nil || ac == nil || st == nil {
		t.Fatalf("tools listed: %v", byName)
	}
	if ci.Annotations.IdempotentHint || !ac.Annotations.IdempotentHint || !st.Annotations.ReadOnlyHint {
		t.Fatalf("hints: create_issue %v, add_comment %v, get_operation read-only %v", ci.Annotations.IdempotentHint, ac.Annotations.IdempotentHint, st.Annotations.ReadOnlyHint)
	}
	schema, _ := json.Marshal(ci.InputSchema)
	if !strings.Contains(string(schema), `"op_id"`) {
		t.Fatalf("create_issue schema has no op_id: %s", schema)
	}
	if !strings.Contains(ac.Description, "within 24 hours is answered with the first call's answer") {
		t.Fatalf("add_comment's description does not say the trade-off: %q", ac.Description)
	}

	// get_operation looks operations up by op id: with no guarded tool
	// that takes one, it is not listed.
	keyed := connect(t, trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}}))
	lr, err = keyed.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lr.Tools {
		if tl.Name == "get_operation" {
			t.Fatal("get_operation listed, though no guarded tool takes an op id")
		}
	}
}

// TestGuardBadInput: bad input through the guard gets the coded refusals
// of idem.AddTool, quotes none of the arguments, and posts nothing.
func TestGuardBadInput(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	srv := trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{
		"create_issue": {idem.RequireOpID()},
		"add_comment":  {idem.RecordKeys("title", "body")},
	})
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	secret := "SECRET-VALUE-42"
	for _, c := range []struct {
		tool string
		args any
		meta mcp.Meta
		code string
	}{
		{"create_issue", map[string]any{"title": secret}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": secret + " with space"}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": 42}, nil, "invalid_op_id"},
		{"create_issue", map[string]any{"title": secret, "op_id": "a"}, mcp.Meta{idem.MetaOpID: "b"}, "invalid_op_id"},
		{"create_issue", map[string]any{"title": 7, "op_id": "op-1"}, nil, "invalid_arguments"},
		{"create_issue", map[string]any{"title": "t", "op_id": "op-1", "extra": secret}, nil, "invalid_arguments"},
		{"add_comment", map[string]any{"title": secret}, nil, "missing_key"},
		{"add_comment", map[string]any{"title": secret, "body": ""}, nil, "missing_key"},
		{"add_comment", json.RawMessage(`[1,2]`), nil, "invalid_arguments"},
		{"add_comment", json.RawMessage(`{"title":"\ud800` + secret + `","body":"b"}`), nil, "invalid_arguments"},
		{"get_operation", map[string]any{"tool": secret}, nil, "invalid_op_id"},
		{"get_operation", map[string]any{"op_id": "x", "tool": "t", secret: 1}, nil, "invalid_arguments"},
	} {
		p := &mcp.CallToolParams{Name: c.tool, Arguments: c.args, Meta: c.meta}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		if !res.IsError || codeOf(res) != c.code {
			t.Errorf("%s %v: error %v code %q, want %s", c.tool, c.args, res.IsError, codeOf(res), c.code)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), "SECRET") {
			t.Errorf("%s: the refusal quotes the arguments: %s", c.tool, b)
		}
	}
	if tr.Posts() != 0 {
		t.Fatalf("%d posts after bad input, want 0", tr.Posts())
	}
}

// TestGuardPerRequestServer: a server built anew for every HTTP request
// (stateless), its answer lost by the network, makes one create.
func TestGuardPerRequestServer(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guard := idem.New(memory.New(nil), nil)
	tools := idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return trackerServer(tr, guard, tools) },
		&mcp.StreamableHTTPOptions{Stateless: true})
	d := &idemtest.HTTPDropper{Next: h}
	hs := httptest.NewServer(d)
	defer hs.Close()
	d.Arm("add_comment")
	args := map[string]any{"title": "LGTM", "body": "ship it"}
	var answers []*mcp.CallToolResult
	for range 2 {
		client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, call("add_comment", args))
		cs.Close()
		if err == nil {
			answers = append(answers, res)
		}
	}
	if d.Dropped() != 1 || len(answers) != 1 {
		t.Fatalf("dropped %d, answered %d; want 1 and 1", d.Dropped(), len(answers))
	}
	if tr.Created() != 1 || answers[0].Meta[idem.MetaReplayed] != true {
		t.Fatalf("%d created, retry replayed %v; want 1 and true", tr.Created(), answers[0].Meta[idem.MetaReplayed])
	}
}

// fakeClock is a clock a test moves.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	cs, err := idemtest.Connect(ctxFor(t), srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestGuardAnswersExpire: a keyed comment repeated within the TTL is
// answered with the first; once the TTL has passed, the same comment made
// on purpose is posted again.
func TestGuardAnswersExpire(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	clock := newFakeClock()
	guard := idem.New(memory.New(&memory.Options{Now: clock.now}), &idem.Options{TTL: time.Hour, Now: clock.now})
	cs := connect(t, trackerServer(tr, guard, idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}}))
	args := map[string]any{"title": "LGTM", "body": "ship it"}
	for i, step := range []time.Duration{0, 59 * time.Minute, 2 * time.Minute} {
		clock.add(step)
		res, err := cs.CallTool(ctx, call("add_comment", args))
		if err != nil {
			t.Fatal(err)
		}
		structured(t, res)
		want := []int64{1, 1, 2}[i]
		if tr.Posts() != want {
			t.Fatalf("after %v more: %d posts, want %d", step, tr.Posts(), want)
		}
	}
}

// TestGuardScopesKeepOperationsApart: the same op id sent by two users is
// two operations: each is created, with its own upstream key, and neither
// gets the other's answer.
func TestGuardScopesKeepOperationsApart(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guard := idem.New(memory.New(nil), &idem.Options{Scope: func(ctx context.Context, req *mcp.CallToolRequest) string {
		u, _ := req.Params.Meta["test/user"].(string)
		return u
	}})
	cs := connect(t, trackerServer(tr, guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))
	var got []string
	for _, user := range []string{"alice", "bob", "alice"} {
		p := call("create_issue", map[string]any{"title": "from " + user, "op_id": "op-1"})
		p.Meta = mcp.Meta{"test/user": user}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, structured(t, res))
	}
	if tr.Created() != 2 || got[0] != got[2] || got[0] == got[1] {
		t.Fatalf("%d created, answers %q; want 2, alice's repeat answered with hers and bob's his own", tr.Created(), got)
	}
	if tr.Keys()[0] == tr.Keys()[1] {
		t.Fatalf("alice and bob sent the same upstream key %q", tr.Keys()[0])
	}
}

// TestGuardClientCallID: a tool with an optional op id and no keys is not
// idempotent, but a client's resend that carries its own stable id of the
// call (Claude Code's claudecode/toolUseId) is caught: one create. A new
// id is a new call.
func TestGuardClientCallID(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	cs := connect(t, trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{"create_issue": {idem.OpID()}}))
	for _, id := range []string{"toolu_01", "toolu_01", "toolu_02"} {
		p := call("create_issue", map[string]any{"title": "t"})
		p.Meta = mcp.Meta{"claudecode/toolUseId": id}
		if _, err := cs.CallTool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Created() != 2 {
		t.Fatalf("%d created, want 2: the resend of toolu_01 answered from the first", tr.Created())
	}
}

// TestGuardSlowOwnerFenced: a handler that outlives its lease leaves an
// unknown outcome to a repeat on another server; when reconcile there
// finds it did not happen and the call runs again, the slow handler's late
// answer is fenced off: it overwrites neither the new claim nor its answer.
func TestGuardSlowOwnerFenced(t *testing.T) {
	ctx := ctxFor(t)
	st := memory.New(nil)
	clock := newFakeClock()
	opts := &idem.Options{Lease: time.Minute, Now: clock.now}
	var runs atomic.Int64
	started := make(chan struct{}, 2)
	newSrv := func(release chan struct{}) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "v1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "send"}, func(ctx context.Context, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
			n := int(runs.Add(1))
			started <- struct{}{}
			<-release
			return nil, issue{Number: n}, nil
		})
		srv.AddReceivingMiddleware(idem.New(st, opts).Middleware(idem.Tools{"send": {idem.RequireOpID(), idem.Reconcile(
			func(context.Context, *mcp.CallToolRequest, idem.Pending) (*mcp.CallToolResult, error) {
				return nil, idem.NotDone(errors.New("not sent"))
			})}}))
		return srv
	}
	args := map[string]any{"title": "t", "op_id": "op-1"}
	waitStart := func() {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("a call never started")
		}
	}
	callIn := func(cs *mcp.ClientSession) chan *mcp.CallToolResult {
		ch := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, call("send", args))
			if err != nil {
				t.Error(err)
			}
			ch <- res
		}()
		return ch
	}
	answer := func(ch chan *mcp.CallToolResult) *mcp.CallToolResult {
		select {
		case res := <-ch:
			return res
		case <-ctx.Done():
			t.Fatal("a call never answered")
			return nil
		}
	}
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	a := callIn(connect(t, newSrv(releaseA)))
	waitStart()
	clock.add(2 * time.Minute) // A's lease has passed
	other := connect(t, newSrv(releaseB))
	b := callIn(other)
	waitStart() // B reconciled, claimed again, and runs
	close(releaseA)
	answer(a) // A's late answer, while B holds the claim
	close(releaseB)
	if got := structured(t, answer(b)); got != `{"number":2,"title":"","url":""}` {
		t.Fatalf("B answered %s, want the second run's answer", got)
	}
	again, err := other.CallTool(ctx, call("send", args))
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, again); got != `{"number":2,"title":"","url":""}` || again.Meta[idem.MetaReplayed] != true {
		t.Fatalf("a repeat: %s %v, want the second run's answer replayed", got, again.Meta)
	}
}

// TestGuardOutsideCallsHoldNoWriter: on SQLite, whose one writer a
// transaction holds, 8 different creates at once call the API at once: no
// transaction is open while a guarded handler runs.
func TestGuardOutsideCallsHoldNoWriter(t *testing.T) {
	st, err := sqlite.Open(t.TempDir()+"/w.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := ctxFor(t)
	tr := newTracker(t)
	tr.Delay = 100 * time.Millisecond
	srv := trackerServer(tr, idem.New(st, nil), idem.Tools{"create_issue": {idem.RecordKeys("title")}})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cs, err := idemtest.Connect(ctx, srv, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, call("create_issue", map[string]any{"title": fmt.Sprint("issue ", i)}))
			if err != nil || res.IsError {
				t.Errorf("create %d: %v %v", i, err, res)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if tr.Created() != 8 || tr.MaxInFlight() < 4 {
		t.Fatalf("%d created, at most %d at once (in %v); want 8, and at least 4 at once", tr.Created(), tr.MaxInFlight(), took)
	}
	t.Logf("8 different creates of 100 ms each on SQLite: %v, %d at once", took, tr.MaxInFlight())
}

// TestGuardModelRetries: a model that lost the answer to a keyed comment
// and calls again, with the same arguments, adds no second comment.
func TestGuardModelRetries(t *testing.T) {
	ctx := ctxFor(t)
	fresh := func(ctx context.Context) (*idemtest.Subject, error) {
		tr := newTracker(t)
		srv := trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}})
		return &idemtest.Subject{Server: srv, State: func(context.Context) (any, error) { return tr.Created(), nil }}, nil
	}
	retries, err := idemtest.ModelRetries(ctx, fresh, call("add_comment", map[string]any{"title": "LGTM", "body": "ship it"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(retries) == 0 || retries[0].Kind != "same arguments" || string(retries[0].After) != "1" {
		t.Fatalf("retries %+v: want the same arguments sent again, with 1 comment after", retries)
	}
}

// TestGuardRefusesAsAddTool: bad input gets, through the guard, the very
// refusal (code and words) that idem.AddTool gives the same tool.
func TestGuardRefusesAsAddTool(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guarded := connect(t, trackerServer(tr, idem.New(memory.New(nil), nil), idem.Tools{
		"create_issue": {idem.RequireOpID()},
		"add_comment":  {idem.RecordKeys("title", "body")},
	}))
	wrapped := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1"}, nil)
	store := memory.New(nil)
	noop := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
		return nil, issue{}, nil
	}
	idem.AddTool(wrapped, &mcp.Tool{Name: "create_issue", Description: "Create an issue."}, store, noop, idem.RequireOpID())
	idem.AddTool(wrapped, &mcp.Tool{Name: "add_comment", Description: "Comment on an issue."}, store, noop, idem.RecordKeys("title", "body"))
	plain := connect(t, wrapped)
	secret := "SECRET-VALUE-42"
	for _, c := range []struct {
		tool string
		args any
		meta mcp.Meta
	}{
		{"create_issue", map[string]any{"title": secret}, nil},
		{"create_issue", map[string]any{"title": secret, "op_id": secret + " x"}, nil},
		{"create_issue", map[string]any{"title": secret, "op_id": 42}, nil},
		{"create_issue", map[string]any{"title": secret, "op_id": "a"}, mcp.Meta{idem.MetaOpID: "b"}},
		{"create_issue", map[string]any{"title": secret, "op_id": strings.Repeat("x", 129)}, nil},
		{"create_issue", map[string]any{"title": 7, "op_id": "op-1"}, nil},
		{"create_issue", map[string]any{"op_id": "op-1"}, nil},
		{"create_issue", map[string]any{"title": "t", "op_id": "op-1", secret: 1}, nil},
		{"create_issue", json.RawMessage(`"` + secret + `"`), nil},
		{"add_comment", map[string]any{"title": secret}, nil},
		{"add_comment", map[string]any{"title": secret, "body": nil}, nil},
		{"add_comment", map[string]any{"title": []any{secret}, "body": "b"}, nil},
		{"add_comment", json.RawMessage(`{"title":"\ud800` + secret + `","body":"b"}`), nil},
	} {
		p := &mcp.CallToolParams{Name: c.tool, Arguments: c.args, Meta: c.meta}
		got, err := guarded.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !got.IsError || codeOf(got) == "" || codeOf(got) != codeOf(want) || textOf(got) != textOf(want) {
			t.Errorf("%s %v: guard %q %q, AddTool %q %q", c.tool, c.args, codeOf(got), textOf(got), codeOf(want), textOf(want))
		}
		if strings.Contains(textOf(got), "SECRET") {
			t.Errorf("%s: the refusal quotes the arguments: %q", c.tool, textOf(got))
		}
	}
	if tr.Posts() != 0 {
		t.Fatalf("%d posts after bad input, want 0", tr.Posts())
	}
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestGuardOwnAuthNeedsAScope: a server that checks bearer tokens in a
// middleware of its own leaves the SDK no user id; with the default scope
// every caller would share one, and one would get another's answer. So the
// guard refuses such calls scope_required until the server says who its
// callers are, and then keeps them apart.
func TestGuardOwnAuthNeedsAScope(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		t.Run(fmt.Sprint("scope=", scoped), func(t *testing.T) {
			ctx := ctxFor(t)
			tr := newTracker(t)
			var opts *idem.Options
			if scoped {
				opts = &idem.Options{Scope: func(ctx context.Context, req *mcp.CallToolRequest) string {
					return strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
				}}
			}
			guard := idem.New(memory.New(nil), opts)
			tools := idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}}
			mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return trackerServer(tr, guard, tools) },
				&mcp.StreamableHTTPOptions{Stateless: true})
			ownAuth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
					http.Error(w, "unauthorized", http.StatusUnauthorized)
					return
				}
				mcpHandler.ServeHTTP(w, r)
			})
			hs := httptest.NewServer(ownAuth)
			defer hs.Close()
			var answers []*mcp.CallToolResult
			for _, user := range []string{"alice", "bob"} {
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v1"}, nil).Connect(ctx,
					&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearer{user}}, MaxRetries: -1}, nil)
				if err != nil {
					t.Fatal(err)
				}
				res, err := cs.CallTool(ctx, call("add_comment", map[string]any{"title": "LGTM", "body": "ship it"}))
				cs.Close()
				if err != nil {
					t.Fatal(err)
				}
				answers = append(answers, res)
			}
			if !scoped {
				for _, res := range answers {
					if codeOf(res) != "scope_required" {
						t.Fatalf("without a scope: %v, want scope_required", res.Meta)
					}
				}
				if tr.Posts() != 0 {
					t.Fatalf("%d posts, want 0", tr.Posts())
				}
				return
			}
			if tr.Posts() != 2 || answers[1].Meta[idem.MetaReplayed] == true {
				t.Fatalf("%d posts, bob replayed %v: want 2 posts, and bob's own answer", tr.Posts(), answers[1].Meta[idem.MetaReplayed])
			}
		})
	}
}

// TestGuardOnlyWhen: a tool that creates or updates, by its "method", is
// guarded on its creates alone: a lost create makes one issue, an update
// without the create's key runs as it would without the guard, and the
// published tool says which calls are guarded without claiming every call
// is idempotent.
func TestGuardOnlyWhen(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	var updates atomic.Int64
	type writeIn struct {
		Method string `json:"method"`
		Title  string `json:"title,omitempty"`
		Number int    `json:"number,omitempty"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "issue_write", Description: "Create or update an issue."}, func(ctx context.Context, req *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, issue, error) {
		if in.Method == "update" {
			updates.Add(1)
			return nil, issue{Number: in.Number}, nil
		}
		return tr.createIssue(ctx, req, newIssue{Title: in.Title})
	})
	srv.AddReceivingMiddleware(idem.New(memory.New(nil), nil).Middleware(idem.Tools{
		"issue_write": {idem.OnlyWhen("method", "create"), idem.RecordKeys("title")},
	}))
	if _, err := idemtest.DropAndRetry(ctx, srv, call("issue_write", map[string]any{"method": "create", "title": "t"})); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, srv)
	for range 2 {
		res, err := cs.CallTool(ctx, call("issue_write", map[string]any{"method": "update", "number": 1}))
		if err != nil || res.IsError {
			t.Fatalf("an update without a title: %v %v, want it run", err, res)
		}
	}
	missing, err := cs.CallTool(ctx, call("issue_write", map[string]any{"method": "create"}))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Created() != 1 || updates.Load() != 2 || codeOf(missing) != "missing_key" {
		t.Fatalf("%d created, %d updates, a create without its key %q; want 1, 2 and missing_key", tr.Created(), updates.Load(), codeOf(missing))
	}
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lr.Tools {
		if tl.Name != "issue_write" {
			continue
		}
		schema, _ := json.Marshal(tl.InputSchema)
		if tl.Annotations.IdempotentHint || strings.Contains(string(schema), `"required":["method","title"]`) ||
			!strings.Contains(tl.Description, `Safe to retry with the same arguments when "method" is "create"`) {
			t.Fatalf("published: idempotentHint %v, schema %s, description %q", tl.Annotations.IdempotentHint, schema, tl.Description)
		}
	}
}

// TestOnlyWhenIsTheGuards: idem.AddTool, whose record keys name the record
// every call writes, refuses OnlyWhen.
func TestOnlyWhenIsTheGuards(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "OnlyWhen") {
			t.Fatalf("recovered %v, want a panic that names OnlyWhen", r)
		}
	}()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "t"}, memory.New(nil),
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
			return nil, issue{}, nil
		}, idem.RecordKeys("title"), idem.OnlyWhen("title"))
}

// TestGuardHTTPEffects: a server whose handlers report every failure as a
// plain error, their requests sent through idem.Transport, with
// Options.HTTPEffects: a call whose requests cannot have acted is released
// and runs again on a repeat; one whose request may have acted is an
// unknown outcome, not posted again.
func TestGuardHTTPEffects(t *testing.T) {
	for _, c := range []struct {
		name    string
		title   string             // "!" is refused by the handler before any request
		fail    func() (int, bool) // the tracker's answer to the first create
		down    bool               // the API refuses connections on the first attempt
		posts   int64              // creates received after a repeat
		code    string             // the repeat's code
		without string             // the repeat's code without HTTPEffects
	}{
		{name: "refused before sending", title: "!", posts: 0, code: "", without: "unknown_outcome"},
		{name: "422", title: "t", fail: func() (int, bool) { return http.StatusUnprocessableEntity, false }, posts: 2, code: "", without: "unknown_outcome"},
		{name: "409", title: "t", fail: func() (int, bool) { return http.StatusConflict, false }, posts: 1, code: "unknown_outcome", without: "unknown_outcome"},
		{name: "502", title: "t", fail: func() (int, bool) { return http.StatusBadGateway, true }, posts: 1, code: "unknown_outcome", without: "unknown_outcome"},
		{name: "connection refused", title: "t", down: true, posts: 1, code: "", without: "unknown_outcome"},
	} {
		for _, httpEffects := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/HTTPEffects=%v", c.name, httpEffects), func(t *testing.T) {
				ctx := ctxFor(t)
				tr := newTracker(t)
				if c.fail != nil {
					tr.FailNext(c.fail())
				}
				client := &http.Client{Transport: idem.Transport(nil)}
				base := tr.URL
				if c.down {
					dead := httptest.NewServer(http.NotFoundHandler())
					base = dead.URL
					dead.Close() // nothing listens there now
				}
				attempt := 0
				srv := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v1"}, nil)
				mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
					Title string `json:"title"`
					N     int    `json:"n"`
				}) (*mcp.CallToolResult, issue, error) {
					attempt++
					url := base
					if attempt > 1 {
						url = tr.URL
					}
					if in.Title == "!" {
						return nil, issue{}, errors.New("a title must say something")
					}
					hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/issues", strings.NewReader(`{"title":"`+in.Title+`"}`))
					resp, err := client.Do(hreq)
					if err != nil {
						return nil, issue{}, err
					}
					defer resp.Body.Close()
					if resp.StatusCode >= 300 {
						return nil, issue{}, fmt.Errorf("the tracker answered %d", resp.StatusCode)
					}
					var is issue
					return nil, is, json.NewDecoder(resp.Body).Decode(&is)
				})
				srv.AddReceivingMiddleware(idem.New(memory.New(nil), &idem.Options{HTTPEffects: httpEffects}).Middleware(idem.Tools{"create_issue": {idem.RecordKeys("title", "n")}}))
				cs := connect(t, srv)
				args := map[string]any{"title": c.title, "n": 1}
				first, err := cs.CallTool(ctx, call("create_issue", args))
				if err != nil || !first.IsError {
					t.Fatalf("first: %v %v, want an error result", err, first)
				}
				again, err := cs.CallTool(ctx, call("create_issue", args))
				if err != nil {
					t.Fatal(err)
				}
				want := c.code
				if !httpEffects {
					want = c.without
				}
				if codeOf(again) != want {
					t.Fatalf("repeat: code %q, want %q", codeOf(again), want)
				}
				if posts := tr.Posts(); httpEffects && posts != c.posts {
					t.Fatalf("%d creates received, want %d", posts, c.posts)
				}
			})
		}
	}
}

// TestMetaOpIDOnAToolThatTakesNone: an op id in _meta on a tool that takes
// none as an argument and has no keys is kept: the repeat is answered from
// the first, and get_operation says committed, where it said
// not_committed for a write that had committed, and the client was told
// to send it again.
func TestMetaOpIDOnAToolThatTakesNone(t *testing.T) {
	ctx := ctxFor(t)
	store := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "append_note"}, store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
		runs++
		return nil, issue{Number: runs}, tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprint(runs)}, in)
	})
	idem.RegisterStatusTool(srv, store)
	cs := connect(t, srv)
	p := call("append_note", map[string]any{"title": "t"})
	p.Meta = mcp.Meta{idem.MetaOpID: "app-1"}
	for range 2 {
		if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
			t.Fatalf("%v %v", err, res)
		}
	}
	st, err := cs.CallTool(ctx, call("get_operation", map[string]any{"tool": "append_note", "op_id": "app-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, st); runs != 1 || !strings.Contains(got, `"status":"committed"`) {
		t.Fatalf("%d runs, get_operation %s; want 1 and committed", runs, got)
	}
}

// TestOutputCheckedAgainstItsSchema: a handler's output is checked against
// the output schema published for it, as the go-sdk checks its own typed
// tools': an output the schema refuses is answered internal, quotes
// nothing, and its writes roll back (a retry runs again); the schema's
// defaults are applied, as the go-sdk applies them.
func TestOutputCheckedAgainstItsSchema(t *testing.T) {
	ctx := ctxFor(t)
	type out struct {
		ID     string `json:"id,omitempty"`
		Status string `json:"status,omitempty"`
	}
	schema := &jsonschema.Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*jsonschema.Schema{
		"id":     {Type: "string"},
		"status": {Type: "string", Default: json.RawMessage(`"open"`)},
	}}
	store := memory.New(nil)
	runs := 0
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "v1"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add", OutputSchema: schema}, store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, out, error) {
		runs++
		if err := tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprint(runs)}, in); err != nil {
			return nil, out{}, err
		}
		if in.Title == "bad" {
			return nil, out{Status: "SECRET-VALUE"}, nil // no id
		}
		return nil, out{ID: "n-1"}, nil
	}, idem.RequireOpID())
	cs := connect(t, srv)
	for i := range 2 {
		res, err := cs.CallTool(ctx, call("add", map[string]any{"title": "bad", "op_id": "op-bad"}))
		if err != nil {
			t.Fatal(err)
		}
		if codeOf(res) != "internal" || strings.Contains(textOf(res), "SECRET") {
			t.Fatalf("attempt %d: %v %q, want internal quoting nothing", i, res.Meta, textOf(res))
		}
	}
	if runs != 2 {
		t.Fatalf("the handler ran %d times, want 2: a refused output keeps nothing, so the retry runs", runs)
	}
	res, err := cs.CallTool(ctx, call("add", map[string]any{"title": "good", "op_id": "op-good"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, res); got != `{"id":"n-1","status":"open"}` {
		t.Fatalf("structured content %s, want the output with the schema's default", got)
	}
}

// TestAddToolOnAGuard: tools registered with idem.AddTool on a Guard take
// its server-wide settings (here the TTL and the clock), as do
// get_operation and the guarded tools, so none can disagree; a
// server-wide option given to one tool is refused.
func TestAddToolOnAGuard(t *testing.T) {
	ctx := ctxFor(t)
	clock := newFakeClock()
	guard := idem.New(memory.New(&memory.Options{Now: clock.now}), &idem.Options{TTL: time.Hour, Now: clock.now})
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "add_note"}, guard, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in newIssue) (*mcp.CallToolResult, issue, error) {
		runs++
		return nil, issue{Number: runs}, tx.Create(ctx, idem.Key{Collection: "notes", ID: fmt.Sprint(runs)}, in)
	}, idem.RequireOpID())
	idem.RegisterStatusTool(srv, guard)
	cs := connect(t, srv)
	args := map[string]any{"title": "t", "op_id": "op-1"}
	status := func() string {
		st, err := cs.CallTool(ctx, call("get_operation", map[string]any{"tool": "add_note", "op_id": "op-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return structured(t, st)
	}
	for i, step := range []time.Duration{0, 59 * time.Minute, 2 * time.Minute} {
		clock.add(step)
		if i == 2 && !strings.Contains(status(), `"status":"not_committed"`) {
			t.Fatalf("get_operation past the Guard's TTL: %s, want not_committed", status())
		}
		if _, err := cs.CallTool(ctx, call("add_note", args)); err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 1, 2}[i]; runs != want {
			t.Fatalf("after %v more: %d runs, want %d (the Guard's TTL of an hour)", step, runs, want)
		}
	}
}
