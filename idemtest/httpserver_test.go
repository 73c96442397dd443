package idemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// tracker is the world outside the server that the tools below write to,
// as an issue tracker behind a REST API is: it keeps what they created, in
// the order they created it.
type tracker struct {
	mu       sync.Mutex // guards the fields
	Issues   []string   `json:"issues"`
	Comments []string   `json:"comments"`
}

func (tr *tracker) created() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.Issues) + len(tr.Comments)
}

// state is what a Subject over tr reads.
func (tr *tracker) state(context.Context) (any, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return map[string]any{"issues": tr.Issues, "comments": tr.Comments}, nil
}

// trackerTools guards create_issue with a required op id and add_comment
// with its content as record keys.
var trackerTools = idem.Tools{
	"create_issue": {idem.RequireOpID()},
	"add_comment":  {idem.RecordKeys("issue", "body")},
}

var objectSchema = json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"issue":{"type":"integer"},"body":{"type":"string"}}}`)

// trackerServer is a server as people write one: raw handlers that create
// in tr, unaware of idemkit; with guard, the one line that protects them.
func trackerServer(tr *tracker, guard *idem.Guard) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tracker", Version: "v0"}, nil)
	create := func(list *[]string, field string) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in map[string]any
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			tr.mu.Lock()
			*list = append(*list, fmt.Sprint(in[field]))
			n := len(*list)
			tr.mu.Unlock()
			return &mcp.CallToolResult{StructuredContent: map[string]any{"number": n},
				Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("created #%d", n)}}}, nil
		}
	}
	srv.AddTool(&mcp.Tool{Name: "create_issue", InputSchema: objectSchema}, create(&tr.Issues, "title"))
	srv.AddTool(&mcp.Tool{Name: "add_comment", InputSchema: objectSchema}, create(&tr.Comments, "body"))
	if guard != nil {
		srv.AddReceivingMiddleware(guard.Middleware(trackerTools))
	}
	return srv
}

// perRequest is tr's server over stateless streamable HTTP, built anew for
// every request; guarded with a guard of its own when guarded is set.
func perRequest(tr *tracker, guarded bool) http.Handler {
	var guard *idem.Guard
	if guarded {
		guard = idem.New(memory.New(nil), nil)
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return trackerServer(tr, guard) },
		&mcp.StreamableHTTPOptions{Stateless: true})
}

// builtOnce is tr's server built once, behind a stateful handler.
func builtOnce(tr *tracker, guarded bool) http.Handler {
	var guard *idem.Guard
	if guarded {
		guard = idem.New(memory.New(nil), nil)
	}
	srv := trackerServer(tr, guard)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// trackerSubject returns fresh Subjects: a new tracker behind its server
// over HTTP.
func trackerSubject(guarded bool) func(context.Context) (*idemtest.Subject, error) {
	return func(context.Context) (*idemtest.Subject, error) {
		tr := &tracker{}
		return &idemtest.Subject{Handler: perRequest(tr, guarded), State: tr.state}, nil
	}
}

func httpContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var handlers = []struct {
	name string
	new  func(tr *tracker, guarded bool) http.Handler
}{{"per request", perRequest}, {"built once", builtOnce}}

// TestHTTPServerDropAndRetry: a create whose answer is lost, sent again on
// a new connection, is created twice by an unguarded server and once by a
// guarded one, whose retry is the replay of the first answer.
func TestHTTPServerDropAndRetry(t *testing.T) {
	for _, h := range handlers {
		for _, guarded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/guarded=%v", h.name, guarded), func(t *testing.T) {
				tr := &tracker{}
				hs := idemtest.NewHTTPServer(h.new(tr, guarded))
				defer hs.Close()
				res, err := hs.DropAndRetry(httpContext(t), params("create_issue", map[string]any{"title": "crash", "op_id": "op-1"}))
				if err != nil {
					t.Fatal(err)
				}
				if hs.Dropper.Dropped() != 1 {
					t.Fatalf("dropped %d answers, want 1", hs.Dropper.Dropped())
				}
				want := map[bool]int{false: 2, true: 1}[guarded]
				if tr.created() != want {
					t.Fatalf("%d issues created, want %d", tr.created(), want)
				}
				if guarded && (res.IsError || res.Meta[idem.MetaReplayed] != true || !strings.Contains(mustJSON(res.StructuredContent), `"number":1`)) {
					t.Fatalf("retry answered %s, want issue 1 replayed", mustJSON(res))
				}
			})
		}
	}
}

// TestHTTPServerDropAndRetryNotLost: a call whose answer could not be lost
// is an error, and leaves the Dropper armed for nothing.
func TestHTTPServerDropAndRetryNotLost(t *testing.T) {
	tr := &tracker{}
	hs := idemtest.NewHTTPServer(perRequest(tr, true))
	defer hs.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := hs.DropAndRetry(done, params("create_issue", map[string]any{"title": "t", "op_id": "op-1"})); err == nil {
		t.Fatal("no error for a call that never reached the server")
	}
	cs, err := hs.Connect(httpContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(httpContext(t), params("create_issue", map[string]any{"title": "t", "op_id": "op-2"})); err != nil || hs.Dropper.Dropped() != 0 {
		t.Fatalf("a later call: %v, %d dropped; want its answer", err, hs.Dropper.Dropped())
	}
}

// TestHTTPServerSendTwice: the same call twice on one session over HTTP
// answers alike and creates once when guarded, and not when unguarded.
func TestHTTPServerSendTwice(t *testing.T) {
	for _, h := range handlers {
		for _, guarded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/guarded=%v", h.name, guarded), func(t *testing.T) {
				ctx := httpContext(t)
				tr := &tracker{}
				hs := idemtest.NewHTTPServer(h.new(tr, guarded))
				defer hs.Close()
				cs, err := hs.Connect(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				a, b, err := idemtest.SendTwice(ctx, cs, params("create_issue", map[string]any{"title": "crash", "op_id": "op-1"}))
				if err != nil {
					t.Fatal(err)
				}
				same := idemtest.SameAnswer(a, b)
				if guarded != (same == nil) || a.IsError {
					t.Fatalf("guarded %v: SameAnswer %v, first %s", guarded, same, mustJSON(a))
				}
				if want := map[bool]int{false: 2, true: 1}[guarded]; tr.created() != want {
					t.Fatalf("%d issues created, want %d", tr.created(), want)
				}
			})
		}
	}
}

// TestConcurrentlyOverHTTP: four identical comments at once, each from a
// client of its own, are created four times unguarded, and Concurrently
// says so; guarded, once, and the other three are replays.
func TestConcurrentlyOverHTTP(t *testing.T) {
	call := same(params("add_comment", map[string]any{"issue": 1, "body": "LGTM"}))
	r, err := idemtest.Concurrently(httpContext(t), trackerSubject(false), 4, call)
	if err == nil || r == nil {
		t.Fatalf("unguarded: %v, want the four comments reported", err)
	}
	if r.Ran != 4 || !strings.Contains(string(r.State), `"comments":["LGTM","LGTM","LGTM","LGTM"]`) {
		t.Errorf("unguarded: ran %d, state %s; want 4 and four comments", r.Ran, r.State)
	}

	r, err = idemtest.Concurrently(httpContext(t), trackerSubject(true), 4, call)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ran != 1 || r.Replayed != 3 || r.Refused != 0 || string(r.State) != `{"comments":["LGTM"],"issues":null}` {
		t.Errorf("guarded: ran %d, replayed %d, refused %d, state %s; want 1, 3, 0 and one comment", r.Ran, r.Replayed, r.Refused, r.State)
	}
}

// TestModelRetriesOverHTTP: a model that resends a comment whose answer
// was lost comments twice on an unguarded server; on a guarded one the
// comment's content is its key, and nothing moves.
func TestModelRetriesOverHTTP(t *testing.T) {
	call := params("add_comment", map[string]any{"issue": 1, "body": "LGTM"})
	retries, err := idemtest.ModelRetries(httpContext(t), trackerSubject(false), call)
	if err == nil || !strings.Contains(err.Error(), "same arguments") {
		t.Fatalf("unguarded: %v, want the resend reported", err)
	}
	if len(retries) != 1 || string(retries[0].After) != `{"comments":["LGTM","LGTM"],"issues":null}` {
		t.Errorf("unguarded retries: %+v", retries)
	}
	retries, err = idemtest.ModelRetries(httpContext(t), trackerSubject(true), call)
	if err != nil {
		t.Fatal(err)
	}
	if len(retries) != 1 || retries[0].Answer.Meta[idem.MetaReplayed] != true {
		t.Errorf("guarded: %+v, want the one retry replayed", retries)
	}
}

// TestAllOrdersOverHTTP: two comments in both orders, each order on a
// fresh server over HTTP, end in two orders of the comments.
func TestAllOrdersOverHTTP(t *testing.T) {
	err := idemtest.AllOrders(httpContext(t), trackerSubject(true),
		params("add_comment", map[string]any{"issue": 1, "body": "a"}), params("add_comment", map[string]any{"issue": 1, "body": "b"}))
	if err == nil || !strings.Contains(err.Error(), `["a","b"]`) || !strings.Contains(err.Error(), `["b","a"]`) {
		t.Fatalf("AllOrders: %v, want both orders of the comments", err)
	}
}

// TestSubjectServerOrHandler: a Subject has one of the two.
func TestSubjectServerOrHandler(t *testing.T) {
	tr := &tracker{}
	both := func(context.Context) (*idemtest.Subject, error) {
		return &idemtest.Subject{Server: trackerServer(tr, nil), Handler: perRequest(tr, false), State: tr.state}, nil
	}
	call := params("add_comment", map[string]any{"issue": 1, "body": "b"})
	if err := idemtest.AllOrders(httpContext(t), both, call); err == nil || !strings.Contains(err.Error(), "both a Server and a Handler") {
		t.Errorf("AllOrders: %v", err)
	}
	if _, err := idemtest.ModelRetries(httpContext(t), both, call); err == nil || !strings.Contains(err.Error(), "both a Server and a Handler") {
		t.Errorf("ModelRetries: %v", err)
	}
	if tr.created() != 0 {
		t.Errorf("%d created by a Subject that was refused", tr.created())
	}
}

// TestHTTPServerSendsParamHeaders: a server that asks for an argument in a
// request header (x-mcp-header), as github-mcp-server does for owner and
// repo, refuses a call without it; HTTPServer's clients list the tools
// first, as clients do, and so send it.
func TestHTTPServerSendsParamHeaders(t *testing.T) {
	ctx := httpContext(t)
	runs := 0
	srv := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "v1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"owner":{"type":"string","x-mcp-header":"Owner"}},"required":["owner"]}`)
	srv.AddTool(&mcp.Tool{Name: "touch", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	hs := idemtest.NewHTTPServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer hs.Close()
	if _, err := hs.DropAndRetry(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"owner": "acme"}}); err != nil {
		t.Fatal(err)
	}
	if runs != 2 {
		t.Fatalf("the handler ran %d times, want 2 (the lost call and its retry)", runs)
	}
}
