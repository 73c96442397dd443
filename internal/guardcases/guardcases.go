// Package guardcases holds the cases of idem.Guard that both MCP libraries
// run: each is written once over a [GuardLibrary], which idem's tests
// implement for the go-sdk and idem/mcpgo's for mcp-go. It is a package of
// its own, apart from internal/mwlib, so that the stores' tests, which use
// mwlib through storetest, do not link SQLite.
package guardcases

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/trackertest"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// The Guard's cases below are written once, in no library's types, and run
// by each library's tests (idem for the go-sdk, idem/mcpgo for mcp-go)
// under the tests' own names, through a GuardLibrary.

// A GuardLibrary is an MCP server library as the Guard's cases run
// through it: servers whose tools wrap a tracker API (trackertest), as
// people write them, and clients of the library that call them.
type GuardLibrary interface {
	// TrackerServer returns a server of the library whose tools
	// create_issue and add_comment, with the arguments title and body,
	// each create one issue on api with one POST, forwarding the Guard's
	// idempotency key; a 4xx is a failure that says NotDone, any other
	// failure says nothing. With guard, the server is protected by guard
	// with tools; nil leaves it unprotected.
	TrackerServer(t *testing.T, api *trackertest.API, guard *idem.Guard, tools idem.Tools) GuardServer
	// Reconcile is the library's reconcile option, with a function that
	// finds an unknown create on api by its title.
	Reconcile(api *trackertest.API) idem.Option
}

// A GuardServer is a server of a library, as the library's clients reach
// it.
type GuardServer interface {
	// Connect returns a client on a new connection, closed when t ends.
	Connect(t *testing.T) GuardClient
	// LoseAndRetry calls tool with args, has the answer lost once the call
	// has run, then sends the call again on a new connection and answers
	// the retry. It fails t when no answer was lost.
	LoseAndRetry(t *testing.T, ctx context.Context, tool string, args map[string]any) GuardResult
}

// A GuardClient is a client of a library, connected to a server.
type GuardClient interface {
	// Call calls tool with args.
	Call(ctx context.Context, tool string, args map[string]any) (GuardResult, error)
}

// A GuardResult is a tool result as the cases read it.
type GuardResult struct {
	IsError bool
	// Meta is the result's _meta.
	Meta map[string]any
	// Structured is the structured content as JSON.
	Structured string
	// Text is the text content, joined.
	Text string
}

// Code is the result's error code (idem.MetaError), or "".
func (r GuardResult) Code() string {
	c, _ := r.Meta[idem.MetaError].(string)
	return c
}

// structuredOf is r's structured content, failing t on an error result.
func structuredOf(t *testing.T, r GuardResult) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("error result: %s", r.Text)
	}
	return r.Structured
}

func mustCall(t *testing.T, ctx context.Context, c GuardClient, tool string, args map[string]any) GuardResult {
	t.Helper()
	r, err := c.Call(ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

func guardContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// GuardLostAnswer: a create whose answer is lost, sent again on a new
// connection, creates one issue, and the retry gets the first answer, URL
// and all; without the guard it creates two.
func GuardLostAnswer(t *testing.T, lib GuardLibrary) {
	for _, guarded := range []bool{false, true} {
		t.Run(fmt.Sprint("guarded=", guarded), func(t *testing.T) {
			ctx := guardContext(t)
			tr := trackertest.New(t)
			var guard *idem.Guard
			if guarded {
				guard = idem.New(memory.New(nil), nil)
			}
			srv := lib.TrackerServer(t, tr, guard, idem.Tools{"create_issue": {idem.RequireOpID()}})
			args := map[string]any{"title": "crash on start"}
			if guarded {
				args["op_id"] = "op-1"
			}
			res := srv.LoseAndRetry(t, ctx, "create_issue", args)
			if !guarded {
				if tr.Created() != 2 {
					t.Fatalf("unguarded: %d issues, want the 2 that show the problem", tr.Created())
				}
				return
			}
			if tr.Created() != 1 {
				t.Fatalf("%d issues created, want 1", tr.Created())
			}
			if got := structuredOf(t, res); !strings.Contains(got, `"url":"`+tr.URL+`/issues/1"`) {
				t.Fatalf("retry answered %s, want the first issue with its URL", got)
			}
			if res.Meta[idem.MetaReplayed] != true {
				t.Fatalf("retry not marked replayed: %v", res.Meta)
			}
		})
	}
}

// GuardIdempotencyKey: the key sent upstream is the same on a retry over
// another connection, differs for another op id, and does not depend on
// the session.
func GuardIdempotencyKey(t *testing.T, lib GuardLibrary) {
	ctx := guardContext(t)
	tr := trackertest.New(t)
	tr.FailNext(http.StatusConflict, false) // the first POST is refused: NotDone
	srv := lib.TrackerServer(t, tr, idem.New(memory.New(nil), nil), idem.Tools{"create_issue": {idem.RequireOpID()}})
	for i, op := range []string{"op-1", "op-1", "op-2"} {
		res := mustCall(t, ctx, srv.Connect(t), "create_issue", map[string]any{"title": "t", "op_id": op})
		if i == 0 && (!res.IsError || res.Code() != "") {
			t.Fatalf("a refused create: %v %v, want the handler's error without a code", res.IsError, res.Meta)
		}
	}
	if tr.Posts() != 3 || tr.Created() != 2 {
		t.Fatalf("%d posts, %d created; want 3 posts (the refused one sent again) and 2 created", tr.Posts(), tr.Created())
	}
	k := tr.Keys()
	if k[0] == "" || k[0] != k[1] || k[1] == k[2] {
		t.Fatalf("keys %q: want the same key for op-1's two attempts and another for op-2", k)
	}
}

// GuardConcurrentIdenticalCalls: 8 identical comments at once, keyed by
// their content, over two servers with guards of their own on one SQLite
// store (two processes), make one upstream create, and get one answer.
func GuardConcurrentIdenticalCalls(t *testing.T, lib GuardLibrary) {
	st, err := sqlite.Open(t.TempDir()+"/g.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := guardContext(t)
	tr := trackertest.New(t)
	tr.Delay = 50 * time.Millisecond
	tools := idem.Tools{"add_comment": {idem.RecordKeys("title", "body")}}
	srvs := []GuardServer{lib.TrackerServer(t, tr, idem.New(st, nil), tools), lib.TrackerServer(t, tr, idem.New(st, nil), tools)}
	clients := make([]GuardClient, 8)
	for i := range clients {
		clients[i] = srvs[i%2].Connect(t)
	}
	var wg sync.WaitGroup
	answers := make([]string, len(clients))
	for i, c := range clients {
		wg.Go(func() {
			res, err := c.Call(ctx, "add_comment", map[string]any{"title": "LGTM", "body": "ship it"})
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = fmt.Sprintf("error %v: %s %s", res.IsError, res.Structured, res.Text)
		})
	}
	wg.Wait()
	if tr.Posts() != 1 {
		t.Fatalf("%d posts for 8 identical calls, want 1", tr.Posts())
	}
	if !strings.HasPrefix(answers[0], `error false: {"number":1,`) {
		t.Fatalf("answer %s, want issue 1", answers[0])
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("answers differ: %s and %s", answers[0], a)
		}
	}
}

// GuardUnknownOutcomeSettled: a create that landed but answered 502 is an
// unknown outcome, answered with the handler's words and the guard's
// sentence: a repeat is refused unknown_outcome without posting; with a
// reconcile function, get_operation and the repeat find the issue and
// answer it.
func GuardUnknownOutcomeSettled(t *testing.T, lib GuardLibrary) {
	for _, reconciled := range []bool{false, true} {
		t.Run(fmt.Sprint("reconcile=", reconciled), func(t *testing.T) {
			ctx := guardContext(t)
			tr := trackertest.New(t)
			tr.FailNext(http.StatusBadGateway, true)
			opts := []idem.Option{idem.RequireOpID()}
			if reconciled {
				opts = append(opts, lib.Reconcile(tr))
			}
			c := lib.TrackerServer(t, tr, idem.New(memory.New(nil), nil), idem.Tools{"create_issue": opts}).Connect(t)
			args := map[string]any{"title": "flaky", "op_id": "op-7"}
			first := mustCall(t, ctx, c, "create_issue", args)
			if !first.IsError || first.Code() != "unknown_outcome" || first.Meta[idem.MetaOpID] != "op-7" {
				t.Fatalf("first answer: error %v, meta %v; want the handler's error marked unknown_outcome", first.IsError, first.Meta)
			}
			if !strings.Contains(first.Text, "the tracker failed (502)") || !strings.Contains(first.Text, "get_operation") {
				t.Fatalf("first answer %q: want the handler's words and the guard's sentence", first.Text)
			}
			st := mustCall(t, ctx, c, "get_operation", map[string]any{"tool": "create_issue", "op_id": "op-7"})
			wantStatus := map[bool]string{false: "unknown", true: "committed"}[reconciled]
			if got := structuredOf(t, st); !strings.Contains(got, `"status":"`+wantStatus+`"`) {
				t.Fatalf("get_operation: %s, want %s", got, wantStatus)
			}
			again := mustCall(t, ctx, c, "create_issue", args)
			if tr.Posts() != 1 || tr.Created() != 1 {
				t.Fatalf("%d posts, %d created after the repeat; want 1 and 1", tr.Posts(), tr.Created())
			}
			if !reconciled {
				if again.Code() != "unknown_outcome" {
					t.Fatalf("repeat: %v, want unknown_outcome", again.Meta)
				}
				return
			}
			if got := structuredOf(t, again); !strings.Contains(got, `"number":1`) || again.Meta[idem.MetaReplayed] != true {
				t.Fatalf("repeat after reconcile: %s %v, want issue 1, replayed", got, again.Meta)
			}
		})
	}
}

// GuardReconcileNotDone: an unknown outcome that reconcile finds did not
// happen is released once the claim's lease has ended (before, the call
// may still be in flight upstream), and the repeat creates the issue once.
func GuardReconcileNotDone(t *testing.T, lib GuardLibrary) {
	ctx := guardContext(t)
	tr := trackertest.New(t)
	tr.FailNext(http.StatusBadGateway, false)
	// The clock the guard and the store read.
	var ns atomic.Int64
	ns.Store(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, ns.Load()) }
	guard := idem.New(memory.New(&memory.Options{Now: now}), &idem.Options{Lease: time.Minute, Now: now})
	c := lib.TrackerServer(t, tr, guard, idem.Tools{"create_issue": {idem.RequireOpID(), lib.Reconcile(tr)}}).Connect(t)
	args := map[string]any{"title": "lost", "op_id": "op-8"}
	if first := mustCall(t, ctx, c, "create_issue", args); first.Code() != "unknown_outcome" {
		t.Fatalf("first: %v, want unknown_outcome", first.Meta)
	}
	if early := mustCall(t, ctx, c, "create_issue", args); early.Code() != "unknown_outcome" || tr.Posts() != 1 {
		t.Fatalf("a repeat within the lease: %v after %d posts, want unknown_outcome and no post", early.Meta, tr.Posts())
	}
	ns.Add(int64(2 * time.Minute))
	again := mustCall(t, ctx, c, "create_issue", args)
	if got := structuredOf(t, again); !strings.Contains(got, `"number":1`) || again.Meta[idem.MetaReplayed] == true {
		t.Fatalf("repeat: %s %v, want a first create", got, again.Meta)
	}
	if tr.Posts() != 2 || tr.Created() != 1 {
		t.Fatalf("%d posts, %d created; want 2 and 1", tr.Posts(), tr.Created())
	}
}
