package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

// TestLostAnswer: a create whose answer is lost (the connection reset
// after the tracker made the issue), sent again on a new connection to a
// server built anew, makes one issue and gets the first answer back;
// without the guard it makes two.
func TestLostAnswer(t *testing.T) {
	for _, unguarded := range []bool{false, true} {
		t.Run(fmt.Sprint("unguarded=", unguarded), func(t *testing.T) {
			ctx := ctxFor(t)
			h := newHarness(t, options{unguarded: unguarded})
			args := issueArgs("Crash on start")
			h.loss.Arm("create_issue")
			if _, err := h.call(ctx, "create_issue", args); err == nil || h.loss.Dropped() != 1 {
				t.Fatalf("first call: %v, dropped %d; want a lost answer", err, h.loss.Dropped())
			}
			built := h.app.built.Load()
			retry := h.mustCall(t, ctx, "create_issue", args)
			creates := h.fake.received().IssueCreates
			t.Logf("upstream creates: %d (servers built: %d)", creates, h.app.built.Load())
			if unguarded {
				if creates != 2 || len(h.fake.issues("acme/app")) != 2 {
					t.Fatalf("unguarded: %d creates, want the 2 that show the problem", creates)
				}
				return
			}
			if creates != 1 {
				t.Fatalf("%d upstream creates, want 1", creates)
			}
			is := issueOf(t, retry)
			if want := h.fake.issues("acme/app")[0]; is != want || !replayed(retry) {
				t.Fatalf("retry answered %+v (replayed %v), want the first issue %+v, replayed", is, replayed(retry), want)
			}
			if h.app.built.Load() <= built {
				t.Fatalf("no new server was built for the retry (%d, then %d)", built, h.app.built.Load())
			}
		})
	}
}

// TestIdenticalCallsAtOnce: 8 identical creates, and 8 identical comments,
// each on a connection of its own while the tracker is slow, make one
// upstream create each, and all 8 get the same answer; without the guard,
// 8.
func TestIdenticalCallsAtOnce(t *testing.T) {
	for _, unguarded := range []bool{false, true} {
		t.Run(fmt.Sprint("unguarded=", unguarded), func(t *testing.T) {
			ctx := ctxFor(t)
			h := newHarness(t, options{unguarded: unguarded})
			h.fake.seed("acme/app", "An issue to comment on")
			h.fake.slow(50 * time.Millisecond)
			issues := h.atOnce(t, ctx, 8, "create_issue", issueArgs("Double tap"))
			comments := h.atOnce(t, ctx, 8, "add_comment", map[string]any{"repo": "acme/app", "number": 1, "body": "+1"})
			got := h.fake.received()
			t.Logf("upstream creates for 8 identical calls: %d issues, %d comments", got.IssueCreates, got.CommentCreates)
			want := 1
			if unguarded {
				want = 8
			}
			if got.IssueCreates != want || got.CommentCreates != want {
				t.Fatalf("%d issue creates and %d comment creates for 8 identical calls each, want %d", got.IssueCreates, got.CommentCreates, want)
			}
			if unguarded {
				return
			}
			for _, answers := range [][]*mcp.CallToolResult{issues, comments} {
				first, _ := json.Marshal(answers[0].StructuredContent)
				ran := 0
				for _, res := range answers {
					if res.IsError {
						t.Fatalf("error answer: %v", textOf(res))
					}
					if b, _ := json.Marshal(res.StructuredContent); string(b) != string(first) {
						t.Fatalf("answers differ: %s and %s", first, b)
					}
					if !replayed(res) {
						ran++
					}
				}
				if ran != 1 {
					t.Fatalf("%d answers not replayed, want 1", ran)
				}
			}
		})
	}
}

// TestModelRetries: a model whose answer was lost and that calls again
// with the same arguments makes no second issue or comment; without the
// guard it does (idemtest.ModelRetries, over an in-memory connection).
func TestModelRetries(t *testing.T) {
	ctx := ctxFor(t)
	calls := []*mcp.CallToolParams{
		{Name: "create_issue", Arguments: issueArgs("Crash on start")},
		{Name: "add_comment", Arguments: map[string]any{"repo": "acme/app", "number": 1, "body": "Also on Android."}},
	}
	for _, unguarded := range []bool{false, true} {
		for _, call := range calls {
			t.Run(fmt.Sprintf("%s/unguarded=%v", call.Name, unguarded), func(t *testing.T) {
				fresh := func(ctx context.Context) (*idemtest.Subject, error) {
					fake := newFakeTracker("", time.Now)
					fake.seed("acme/app", "An issue to comment on")
					api := httptest.NewServer(fake)
					t.Cleanup(api.Close)
					a := newApp(memory.New(nil), config{API: api.URL})
					srv := a.newServer()
					if unguarded {
						srv = mcp.NewServer(&mcp.Implementation{Name: "unguarded", Version: "v0"}, nil)
						a.addTools(srv)
					}
					return &idemtest.Subject{Server: srv, State: func(context.Context) (any, error) {
						return map[string]any{"issues": fake.issues("acme/app"), "comments": fake.comments("acme/app", 1)}, nil
					}}, nil
				}
				retries, err := idemtest.ModelRetries(ctx, fresh, call)
				if len(retries) == 0 {
					t.Fatalf("no retry ran: %v", err)
				}
				t.Logf("%d retries (%s); moved the state: %v", len(retries), retries[0].Kind, retries[0].Moved())
				if unguarded != (err != nil) {
					t.Fatalf("unguarded %v: ModelRetries said %v", unguarded, err)
				}
			})
		}
	}
}

// TestClientGaveUp: the client stops waiting while the tracker is slow
// (its request timeout), the call runs on, and the model's retry with the
// same arguments, over HTTP, waits for it and gets its answer: one issue.
// Without the guard, two.
func TestClientGaveUp(t *testing.T) {
	for _, unguarded := range []bool{false, true} {
		t.Run(fmt.Sprint("unguarded=", unguarded), func(t *testing.T) {
			ctx := ctxFor(t)
			h := newHarness(t, options{unguarded: unguarded})
			arrived, release := make(chan struct{}), make(chan struct{})
			h.fake.failNext(fault{create: true, hook: func() {
				close(arrived)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}})
			args := issueArgs("Export is slow")
			cctx, giveUp := context.WithCancel(ctx)
			first := make(chan error, 1)
			go func() {
				_, err := h.call(cctx, "create_issue", args)
				first <- err
			}()
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatal("the create did not reach the tracker")
			}
			giveUp()
			select {
			case err := <-first:
				if err == nil {
					t.Fatal("the client that gave up got an answer")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the client that gave up still waits 10 s later")
			}
			retry := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := h.call(ctx, "create_issue", args)
				if err != nil {
					t.Error(err)
				}
				retry <- res
			}()
			if unguarded {
				// The retry makes its own issue while the first waits.
				waitFor(t, ctx, func() bool { return len(h.fake.issues("acme/app")) == 2 })
			}
			close(release)
			var res *mcp.CallToolResult
			select {
			case res = <-retry:
			case <-ctx.Done():
				t.Fatal("the retry got no answer")
			}
			if res == nil {
				t.FailNow()
			}
			n := len(h.fake.issues("acme/app"))
			t.Logf("upstream creates: %d", h.fake.received().IssueCreates)
			if unguarded {
				if n != 2 {
					t.Fatalf("unguarded: %d issues, want 2", n)
				}
				return
			}
			if is := issueOf(t, res); n != 1 || is.Number != 1 || !replayed(res) {
				t.Fatalf("%d issues, retry answered #%d (replayed %v); want 1 issue, #1 replayed", n, is.Number, replayed(res))
			}
		})
	}
}

// waitFor waits until cond holds, failing t at ctx's deadline.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("gave up waiting")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestUnknownOutcome: a create the tracker made but answered 502 for (or
// reset the connection of) is an unknown outcome; the repeat's reconcile
// finds the issue and answers it, replayed from then on, with one issue
// made. A create the tracker answered 502 for without making it: the
// repeat at once is refused unknown_outcome (it might still be under way
// upstream); past the lease, reconcile finds none, the claim is released
// and the repeat makes it once.
func TestUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		ft   fault
	}{
		{"made, then 502", fault{create: true, status: http.StatusBadGateway}},
		{"made, then reset", fault{create: true, reset: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			h := newHarness(t, options{})
			// A read first, so that the create goes over a kept-alive
			// connection, which net/http resends a request with an
			// Idempotency-Key on when it breaks.
			h.mustCall(t, ctx, "list_issues", map[string]any{"repo": "acme/app"})
			h.fake.failNext(c.ft)
			args := issueArgs("Login fails on Safari")
			first := h.mustCall(t, ctx, "create_issue", args)
			if got := h.fake.received().IssueCreates; got != 1 {
				t.Fatalf("%d creates received, want 1 (the client must not send it again itself)", got)
			}
			if !first.IsError || codeOf(first) != "unknown_outcome" {
				t.Fatalf("first answer: error %v, code %q; want unknown_outcome", first.IsError, codeOf(first))
			}
			made := h.fake.issues("acme/app")[0]
			for i := range 2 {
				reads := h.fake.received().Reads
				res := h.mustCall(t, ctx, "create_issue", args)
				if is := issueOf(t, res); is != made || !replayed(res) {
					t.Fatalf("repeat %d: %+v replayed %v, want the issue made, replayed", i+1, is, replayed(res))
				}
				if read := h.fake.received().Reads - reads; read != 1-i {
					t.Fatalf("repeat %d read the tracker %d times, want %d (reconcile once, then the stored answer)", i+1, read, 1-i)
				}
			}
			got := h.fake.received()
			t.Logf("upstream: %d creates received, %d issues made", got.IssueCreates, len(h.fake.issues("acme/app")))
			if got.IssueCreates != 1 || len(h.fake.issues("acme/app")) != 1 {
				t.Fatalf("%d creates, %d issues; want 1 and 1", got.IssueCreates, len(h.fake.issues("acme/app")))
			}
		})
	}
	t.Run("not made, then 502", func(t *testing.T) {
		ctx := ctxFor(t)
		h := newHarness(t, options{})
		h.fake.failNext(fault{status: http.StatusBadGateway})
		args := issueArgs("Dark mode")
		if first := h.mustCall(t, ctx, "create_issue", args); codeOf(first) != "unknown_outcome" {
			t.Fatalf("first answer: code %q, want unknown_outcome", codeOf(first))
		}
		if again := h.mustCall(t, ctx, "create_issue", args); !again.IsError || codeOf(again) != "unknown_outcome" {
			t.Fatalf("repeat at once: error %v, code %q; want unknown_outcome", again.IsError, codeOf(again))
		}
		if got := h.fake.received().IssueCreates; got != 1 {
			t.Fatalf("%d creates after the repeat at once, want 1", got)
		}
		h.clock.skip(h.app.lease)
		res := h.mustCall(t, ctx, "create_issue", args)
		if is := issueOf(t, res); is.Number != 1 || replayed(res) {
			t.Fatalf("repeat past the lease: #%d replayed %v, want #1 made by this call", is.Number, replayed(res))
		}
		got := h.fake.received()
		t.Logf("upstream: %d creates received, %d issues made", got.IssueCreates, len(h.fake.issues("acme/app")))
		if got.IssueCreates != 2 || len(h.fake.issues("acme/app")) != 1 {
			t.Fatalf("%d creates, %d issues; want 2 (the failed one and the repeat) and 1", got.IssueCreates, len(h.fake.issues("acme/app")))
		}
	})
	t.Run("comment made, then 502", func(t *testing.T) {
		ctx := ctxFor(t)
		h := newHarness(t, options{})
		h.mustCall(t, ctx, "create_issue", issueArgs("Target"))
		h.fake.failNext(fault{create: true, status: http.StatusBadGateway})
		args := map[string]any{"repo": "acme/app", "number": 1, "body": "Fixed in 1.4.3."}
		if first := h.mustCall(t, ctx, "add_comment", args); codeOf(first) != "unknown_outcome" {
			t.Fatalf("first answer: code %q, want unknown_outcome", codeOf(first))
		}
		res := h.mustCall(t, ctx, "add_comment", args)
		var cm Comment
		if err := remarshal(res.StructuredContent, &cm); err != nil || res.IsError || cm.ID != 1 || !replayed(res) {
			t.Fatalf("repeat: %v %v, want comment 1, replayed", textOf(res), res.Meta)
		}
		if got := h.fake.received().CommentCreates; got != 1 || len(h.fake.comments("acme/app", 1)) != 1 {
			t.Fatalf("%d comment creates, want 1", got)
		}
	})
	t.Run("search down", func(t *testing.T) {
		ctx := ctxFor(t)
		h := newHarness(t, options{})
		h.fake.failNext(fault{create: true, status: http.StatusBadGateway})
		args := issueArgs("Flaky")
		h.mustCall(t, ctx, "create_issue", args)
		h.fake.failSearches(1)
		if again := h.mustCall(t, ctx, "create_issue", args); codeOf(again) != "unknown_outcome" {
			t.Fatalf("repeat while the search fails: code %q, want unknown_outcome", codeOf(again))
		}
		if res := h.mustCall(t, ctx, "create_issue", args); issueOf(t, res).Number != 1 || !replayed(res) {
			t.Fatalf("repeat once the search works: %v, want #1 replayed", res.Meta)
		}
		if got := h.fake.received().IssueCreates; got != 1 {
			t.Fatalf("%d creates, want 1", got)
		}
	})
}

// TestUpstreamFailures: how each failure of the tracker is read. A refusal
// (4xx but 408, 409, 429) or a refused connection did not happen: the
// handler's error is passed on, and a repeat runs again. A timeout, a
// reset or another status may have happened: unknown_outcome, and a
// repeat at once sends nothing.
func TestUpstreamFailures(t *testing.T) {
	notDone := []int{400, 401, 403, 404, 410, 422}
	unknown := []int{408, 409, 429, 500, 502, 503, 504, 302}
	type tc struct {
		name       string
		ft         *fault
		args       map[string]any
		lease      time.Duration
		searchDown bool
		notDone    bool
	}
	var cases []tc
	for _, s := range notDone {
		cases = append(cases, tc{name: fmt.Sprint(s), ft: &fault{status: s}, notDone: true})
	}
	for _, s := range unknown {
		cases = append(cases, tc{name: fmt.Sprint(s), ft: &fault{status: s}})
	}
	cases = append(cases,
		tc{name: "unknown repository", args: map[string]any{"repo": "acme/none", "title": "x"}, notDone: true},
		tc{name: "reset", ft: &fault{reset: true}},
		// The handler's context ends a tenth of the lease early; the
		// search fails, so that the repeat cannot tell either, however
		// late it comes.
		tc{name: "timeout", lease: time.Second, searchDown: true, ft: &fault{create: true, hook: func() { time.Sleep(1500 * time.Millisecond) }}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			h := newHarness(t, options{lease: c.lease})
			if c.ft != nil {
				h.fake.failNext(*c.ft)
			}
			if c.searchDown {
				h.fake.failSearches(1)
			}
			args := c.args
			if args == nil {
				args = issueArgs("Failure " + c.name)
			}
			first := h.mustCall(t, ctx, "create_issue", args)
			if !first.IsError {
				t.Fatalf("no error: %v", first.StructuredContent)
			}
			again := h.mustCall(t, ctx, "create_issue", args)
			creates := h.fake.received().IssueCreates
			if c.notDone {
				if codeOf(first) != "" || creates != 2 {
					t.Fatalf("code %q, %d creates received; want the handler's own error and the repeat sent again (2)", codeOf(first), creates)
				}
				return
			}
			if codeOf(first) != "unknown_outcome" || codeOf(again) != "unknown_outcome" || creates != 1 {
				t.Fatalf("codes %q then %q, %d creates received; want unknown_outcome twice and 1", codeOf(first), codeOf(again), creates)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String()
		ln.Close()
		a := newApp(memory.New(nil), config{API: closed})
		ctx := ctxFor(t)
		_, err = a.api.createIssue(ctx, "acme/app", "x", "")
		if !errors.Is(err, idem.ErrNotDone) {
			t.Fatalf("error %v, want a refused connection read as not done", err)
		}
		cs, err := idemtest.Connect(ctx, a.newServer(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for i := range 2 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: issueArgs("x")})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || codeOf(res) != "" {
				t.Fatalf("attempt %d: code %q, want the handler's own error (not done, so the repeat ran too)", i+1, codeOf(res))
			}
		}
	})
}

// TestIdempotencyKeyForwarded: the create carries the guard's key, a UUID;
// a repeat after a refusal sends the same key, another title another key.
func TestIdempotencyKeyForwarded(t *testing.T) {
	ctx := ctxFor(t)
	h := newHarness(t, options{})
	bad := map[string]any{"repo": "acme/none", "title": "t"}
	h.mustCall(t, ctx, "create_issue", bad)
	h.mustCall(t, ctx, "create_issue", bad)
	h.mustCall(t, ctx, "create_issue", issueArgs("t"))
	k := h.fake.idempotencyKeys()
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if len(k) != 3 || !uuid.MatchString(k[0]) || k[0] != k[1] || k[1] == k[2] {
		t.Fatalf("keys %q: want one UUID for the two attempts on acme/none and another for acme/app", k)
	}
}

// TestBadInput: bad arguments are refused by the guard with a code, before
// the handler runs: the refusal quotes none of the values, and the tracker
// receives nothing.
func TestBadInput(t *testing.T) {
	ctx := ctxFor(t)
	h := newHarness(t, options{})
	const secret = "SECRET-VALUE-42"
	for _, c := range []struct {
		tool string
		args any
		code string
	}{
		{"create_issue", map[string]any{"title": secret}, "missing_key"},
		{"create_issue", map[string]any{"repo": "acme/app", "title": ""}, "missing_key"},
		{"create_issue", map[string]any{"repo": "acme/app", "title": nil, "body": secret}, "missing_key"},
		{"create_issue", map[string]any{"repo": secret + " x/y", "title": secret}, "invalid_arguments"},
		{"create_issue", map[string]any{"repo": "../" + secret + "/..", "title": secret}, "invalid_arguments"},
		{"create_issue", map[string]any{"repo": "acme/app", "title": strings.Repeat(secret, 20)}, "invalid_arguments"},
		{"create_issue", map[string]any{"repo": "acme/app", "title": 7}, "invalid_arguments"},
		{"create_issue", map[string]any{"repo": "acme/app", "title": "t", secret: secret}, "invalid_arguments"},
		{"create_issue", json.RawMessage(`["` + secret + `"]`), "invalid_arguments"},
		{"create_issue", json.RawMessage(`{"repo":"acme/app","title":"\ud800` + secret + `"}`), "invalid_arguments"},
		{"add_comment", map[string]any{"repo": "acme/app", "number": 1, "body": ""}, "missing_key"},
		{"add_comment", map[string]any{"repo": "acme/app", "body": secret}, "missing_key"},
		{"add_comment", map[string]any{"repo": "acme/app", "number": 0, "body": secret}, "invalid_arguments"},
		{"add_comment", map[string]any{"repo": "acme/app", "number": "1", "body": secret}, "invalid_arguments"},
		{"get_operation", map[string]any{"tool": "create_issue", "op_id": secret + " x"}, "invalid_op_id"},
	} {
		res, err := h.call(ctx, c.tool, c.args)
		if err != nil {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		if !res.IsError || codeOf(res) != c.code {
			t.Errorf("%s %v: error %v, code %q; want %s", c.tool, c.args, res.IsError, codeOf(res), c.code)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), "SECRET") {
			t.Errorf("%s: the refusal quotes the arguments: %s", c.tool, b)
		}
	}
	if got := h.fake.received(); got != (counts{}) {
		t.Fatalf("the tracker received %+v after bad input, want nothing", got)
	}

	// The same repo and title with another body: the first call's answer is
	// kept for them, so the guard refuses rather than make a second issue.
	h.mustCall(t, ctx, "create_issue", map[string]any{"repo": "acme/app", "title": "Crash", "body": "first"})
	res := h.mustCall(t, ctx, "create_issue", map[string]any{"repo": "acme/app", "title": "Crash", "body": secret})
	if codeOf(res) != "key_reused" {
		t.Fatalf("code %q, want key_reused", codeOf(res))
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), "SECRET") {
		t.Errorf("key_reused quotes the arguments: %s", b)
	}
	if got := h.fake.received().IssueCreates; got != 1 {
		t.Fatalf("%d creates, want 1", got)
	}
}

// TestPublishedTools: what a client sees in tools/list: the guarded tools
// say idempotentHint and their keys, add_comment the trade-off of a key
// that is its content, list_issues is read-only and unguarded, and
// get_operation, which looks calls up by an op id that these tools do not
// take, is not listed.
func TestPublishedTools(t *testing.T) {
	ctx := ctxFor(t)
	h := newHarness(t, options{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: h.hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range lr.Tools {
		tools[tl.Name] = tl
	}
	ci, ac, li := tools["create_issue"], tools["add_comment"], tools["list_issues"]
	if ci == nil || ac == nil || li == nil || len(tools) != 3 {
		t.Fatalf("tools listed: %v", tools)
	}
	if !ci.Annotations.IdempotentHint || !ac.Annotations.IdempotentHint || !li.Annotations.ReadOnlyHint || li.Annotations.IdempotentHint {
		t.Fatalf("hints: create_issue %+v, add_comment %+v, list_issues %+v", ci.Annotations, ac.Annotations, li.Annotations)
	}
	if !strings.Contains(ci.Description, `the same "repo" and "title" within 24 hours is answered with the first call's answer`) {
		t.Errorf("create_issue's description does not name its keys: %q", ci.Description)
	}
	if !strings.Contains(ac.Description, `"repo", "number" and "body"`) || !strings.Contains(ac.Description, "an identical call meant as a new one in that time also gets the first answer") {
		t.Errorf("add_comment's description does not say the trade-off: %q", ac.Description)
	}
	if schema, _ := json.Marshal(ci.InputSchema); strings.Contains(string(schema), "op_id") {
		t.Errorf("create_issue's schema offers op_id to models: %s", schema)
	}
}
