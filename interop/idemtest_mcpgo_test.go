package interop_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	idemmcpgo "github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// idemtest's helpers on an mcp-go server's streamable HTTP handler, the
// client side on the go-sdk: each tells the unguarded create_issue and
// add_comment (raw mcp-go handlers that append to a list) from the same
// tools made safe with idemkit's mcp-go adapter (create_issue with a
// required op id, add_comment keyed by its content), their effect in the
// store.

// created is what both servers' tools answer.
type created struct {
	Number int `json:"number"`
}

// mcpgoTracker is the state behind one mcp-go server: the titles and
// comment bodies it created, in memory when unguarded, in the store when
// guarded.
type mcpgoTracker struct {
	store idem.Store // nil: unguarded

	mu       sync.Mutex // guards issues and comments
	issues   []string
	comments []string
}

// newMCPGoTracker returns a tracker and its mcp-go server.
func newMCPGoTracker(guarded bool) (*mcpgoTracker, *server.MCPServer) {
	srv := server.NewMCPServer("tracker", "v0")
	tr := &mcpgoTracker{}
	if !guarded {
		appendTo := func(list *[]string, field string) server.ToolHandlerFunc {
			return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
				tr.mu.Lock()
				*list = append(*list, req.GetString(field, ""))
				n := len(*list)
				tr.mu.Unlock()
				return mcpgo.NewToolResultStructured(created{n}, fmt.Sprintf("created #%d", n)), nil
			}
		}
		srv.AddTool(mcpgo.NewTool("create_issue", mcpgo.WithString("title")), appendTo(&tr.issues, "title"))
		srv.AddTool(mcpgo.NewTool("add_comment", mcpgo.WithNumber("issue"), mcpgo.WithString("body")), appendTo(&tr.comments, "body"))
		return tr, srv
	}
	tr.store = memory.New(nil)
	type issueIn struct {
		Title string `json:"title"`
	}
	type commentIn struct {
		Issue int    `json:"issue"`
		Body  string `json:"body"`
	}
	idemmcpgo.AddTool(srv, mcpgo.Tool{Name: "create_issue"}, tr.store,
		func(ctx context.Context, tx idem.Tx, req mcpgo.CallToolRequest, in issueIn) (*mcpgo.CallToolResult, created, error) {
			n, err := appendRecord(ctx, tx, "issues", in.Title)
			return nil, created{n}, err
		}, idem.RequireOpID())
	idemmcpgo.AddTool(srv, mcpgo.Tool{Name: "add_comment"}, tr.store,
		func(ctx context.Context, tx idem.Tx, req mcpgo.CallToolRequest, in commentIn) (*mcpgo.CallToolResult, created, error) {
			// Create-if-absent on the record keys, as RecordKeys asks: a
			// repeat finds the comment and adds nothing.
			var c created
			k := idem.Key{Collection: "comment", ID: fmt.Sprintf("%d:%s", in.Issue, in.Body)}
			if _, err := tx.Get(ctx, k, &c); err == nil || !errors.Is(err, idem.ErrNotFound) {
				return nil, c, err
			}
			n, err := appendRecord(ctx, tx, "comments", in.Body)
			if err != nil {
				return nil, c, err
			}
			return nil, created{n}, tx.Create(ctx, k, created{n})
		}, idem.RecordKeys("issue", "body"))
	idemmcpgo.RegisterStatusTool(srv, tr.store)
	return tr, srv
}

// appendRecord appends value to the list kept in the record coll/all and
// returns its length.
func appendRecord(ctx context.Context, tx idem.Tx, coll, value string) (int, error) {
	k := idem.Key{Collection: coll, ID: "all"}
	var list []string
	v, err := tx.Get(ctx, k, &list)
	if err != nil && !errors.Is(err, idem.ErrNotFound) {
		return 0, err
	}
	list = append(list, value)
	if v == 0 {
		return len(list), tx.Create(ctx, k, list)
	}
	return len(list), tx.Update(ctx, k, v, list)
}

// state is what the tools created: {"issues": [...], "comments": [...]}.
func (tr *mcpgoTracker) state(ctx context.Context) (any, error) {
	if tr.store == nil {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return map[string][]string{"issues": tr.issues, "comments": tr.comments}, nil
	}
	out := map[string][]string{}
	err := idem.New(tr.store, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for _, coll := range []string{"issues", "comments"} {
			var list []string
			if _, err := tx.Get(ctx, idem.Key{Collection: coll, ID: "all"}, &list); err != nil && !errors.Is(err, idem.ErrNotFound) {
				return err
			}
			out[coll] = list
		}
		return nil
	})
	return out, err
}

// created returns how many issues and comments tr holds.
func (tr *mcpgoTracker) created(t *testing.T) int {
	t.Helper()
	st, err := tr.state(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := st.(map[string][]string)
	return len(m["issues"]) + len(m["comments"])
}

// mcpgoHandlers are the ways mcp-go serves streamable HTTP.
var mcpgoHandlers = []struct {
	name string
	new  func(*server.MCPServer) http.Handler
}{
	{"stateless", func(srv *server.MCPServer) http.Handler {
		return server.NewStreamableHTTPServer(srv, server.WithStateLess(true))
	}},
	{"stateful", func(srv *server.MCPServer) http.Handler { return server.NewStreamableHTTPServer(srv) }},
}

// mcpgoSubject returns fresh Subjects: a new tracker's mcp-go server
// behind the handler h makes.
func mcpgoSubject(guarded bool, h func(*server.MCPServer) http.Handler) func(context.Context) (*idemtest.Subject, error) {
	return func(context.Context) (*idemtest.Subject, error) {
		tr, srv := newMCPGoTracker(guarded)
		return &idemtest.Subject{Handler: h(srv), State: tr.state}, nil
	}
}

func gosdkCall(name string, args map[string]any) *gosdk.CallToolParams {
	return &gosdk.CallToolParams{Name: name, Arguments: args}
}

// TestIdemtestOnMCPGo runs DropAndRetry, SendTwice, Concurrently and
// ModelRetries on an mcp-go handler: each fails the unguarded tools and
// passes the guarded ones.
func TestIdemtestOnMCPGo(t *testing.T) {
	issue := gosdkCall("create_issue", map[string]any{"title": "crash", "op_id": "op-1"})
	comment := gosdkCall("add_comment", map[string]any{"issue": 1, "body": "LGTM"})
	for _, h := range mcpgoHandlers {
		for _, guarded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/guarded=%v", h.name, guarded), func(t *testing.T) {
				want := map[bool]int{false: 2, true: 1}[guarded] // creates for a call sent twice
				t.Run("DropAndRetry", func(t *testing.T) {
					tr, srv := newMCPGoTracker(guarded)
					hs := idemtest.NewHTTPServer(h.new(srv))
					defer hs.Close()
					res, err := hs.DropAndRetry(testContext(t), issue)
					if err != nil {
						t.Fatal(err)
					}
					if hs.Dropper.Dropped() != 1 || tr.created(t) != want {
						t.Fatalf("dropped %d, created %d; want 1 and %d", hs.Dropper.Dropped(), tr.created(t), want)
					}
					if guarded && (res.IsError || res.Meta[idem.MetaReplayed] != true) {
						t.Fatalf("retry: error %v, meta %v; want the first answer replayed", res.IsError, res.Meta)
					}
				})
				t.Run("SendTwice", func(t *testing.T) {
					ctx := testContext(t)
					tr, srv := newMCPGoTracker(guarded)
					hs := idemtest.NewHTTPServer(h.new(srv))
					defer hs.Close()
					cs, err := hs.Connect(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer cs.Close()
					a, b, err := idemtest.SendTwice(ctx, cs, issue)
					if err != nil {
						t.Fatal(err)
					}
					if same := idemtest.SameAnswer(a, b); guarded != (same == nil) || a.IsError || tr.created(t) != want {
						t.Fatalf("SameAnswer %v, first error %v, created %d; want %d created", same, a.IsError, tr.created(t), want)
					}
				})
				t.Run("Concurrently", func(t *testing.T) {
					r, err := idemtest.Concurrently(testContext(t), mcpgoSubject(guarded, h.new), 4, func(int) *gosdk.CallToolParams { return comment })
					if r == nil {
						t.Fatalf("no report: %v", err)
					}
					if guarded != (err == nil) {
						t.Fatalf("Concurrently: %v; state %s", err, r.State)
					}
					if !guarded && r.Ran != 4 {
						t.Errorf("ran %d, want 4", r.Ran)
					}
					if guarded && string(r.State) != `{"comments":["LGTM"],"issues":null}` {
						t.Errorf("state %s, want one comment", r.State)
					}
				})
				t.Run("ModelRetries", func(t *testing.T) {
					retries, err := idemtest.ModelRetries(testContext(t), mcpgoSubject(guarded, h.new), comment)
					if guarded != (err == nil) || len(retries) != 1 {
						t.Fatalf("ModelRetries: %v, %d retries", err, len(retries))
					}
					if !guarded && !strings.Contains(err.Error(), "same arguments") {
						t.Errorf("the resend is not named: %v", err)
					}
				})
			})
		}
	}
}
