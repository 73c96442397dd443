package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/trackertest"
)

// runGuard runs the cases of idem.Guard, the middleware for tools whose
// effect lies outside the store, on the store: its claims and answers are
// the store's documents, written by Create, Update and Delete on versions.
func runGuard(t *testing.T, h Harness) {
	t.Run("LostAnswerReplayed", func(t *testing.T) { t.Parallel(); guardLostAnswerReplayed(t, h) })
	t.Run("IdenticalAtOnceAcrossGuards", func(t *testing.T) { t.Parallel(); guardIdenticalAtOnce(t, h) })
	t.Run("UnknownOutcomeNotRunAgain", func(t *testing.T) { t.Parallel(); guardUnknownOutcome(t, h) })
	t.Run("AbandonedClaimSettled", func(t *testing.T) { t.Parallel(); guardAbandonedClaimSettled(t, h) })
	t.Run("AnswerExpires", func(t *testing.T) { t.Parallel(); guardAnswerExpires(t, h) })
	t.Run("StoredBytesBoundAcrossGuards", func(t *testing.T) { t.Parallel(); guardStoredBytesBound(t, h) })
}

// guardStoredBytesBound: a scope's answers, kept through two guards on the
// store (two processes), stop at the bound both count against
// (Options.MaxStoredBytes): the next create is refused quota_exceeded and
// never reaches the API.
func guardStoredBytesBound(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	s := h.New(t, time.Now)
	var sessions []*mcp.ClientSession
	for range 2 {
		cs, err := idemtest.Connect(context.Background(), a.server(idem.New(s, &idem.Options{MaxStoredBytes: 600})), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions = append(sessions, cs)
	}
	var codes []string
	for i := range 6 {
		res, err := sessions[i%2].CallTool(context.Background(), &mcp.CallToolParams{Name: "create", Arguments: map[string]any{"title": fmt.Sprint("t", i)}})
		if err != nil {
			t.Fatal(err)
		}
		code, _ := res.Meta[idem.MetaError].(string)
		codes = append(codes, code)
	}
	// Each create keeps its arguments and an answer of about 170 bytes:
	// three fit under 600.
	want := []string{"", "", "", "quota_exceeded", "quota_exceeded", "quota_exceeded"}
	if fmt.Sprint(codes) != fmt.Sprint(want) || a.Posts() != 3 {
		t.Fatalf("codes %q after %d posts; want %q after 3", codes, a.Posts(), want)
	}
}

// outsideAPI is a tracker API on loopback that counts the creates it gets
// (trackertest).
type outsideAPI struct{ *trackertest.API }

func newOutsideAPI(t *testing.T) *outsideAPI { return &outsideAPI{trackertest.New(t)} }

type createIn struct {
	Title string `json:"title"`
}

// server is a server whose create tool's whole effect is one POST to a,
// guarded by g with opts.
func (a *outsideAPI) server(g *idem.Guard, opts ...idem.Option) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "outside", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "create"}, func(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, trackertest.Issue, error) {
		body, _ := json.Marshal(trackertest.NewIssue{Title: in.Title})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/issues", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, trackertest.Issue{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return nil, trackertest.Issue{}, fmt.Errorf("upstream %d", resp.StatusCode)
		}
		var is trackertest.Issue
		return nil, is, json.NewDecoder(resp.Body).Decode(&is)
	})
	srv.AddReceivingMiddleware(g.Middleware(idem.Tools{"create": append([]idem.Option{idem.RecordKeys("title")}, opts...)}))
	return srv
}

func numberOf(t *testing.T, res *mcp.CallToolResult) int {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result: %v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var is trackertest.Issue
	if err := json.Unmarshal(b, &is); err != nil {
		t.Fatal(err)
	}
	return is.Number
}

// guardLostAnswerReplayed: a create whose answer is lost, sent again on a
// new connection, posts once and gets the first answer back.
func guardLostAnswerReplayed(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	srv := a.server(idem.New(h.New(t, time.Now), nil))
	res, err := idemtest.DropAndRetry(context.Background(), srv, &mcp.CallToolParams{Name: "create", Arguments: map[string]any{"title": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := numberOf(t, res); n != 1 || a.Posts() != 1 || res.Meta[idem.MetaReplayed] != true {
		t.Fatalf("retry answered %d (replayed %v) after %d posts; want the first create, replayed, 1 post", n, res.Meta[idem.MetaReplayed], a.Posts())
	}
}

// guardIdenticalAtOnce: identical calls at once, through two guards on the
// store (two processes), post once, and every call gets that answer.
func guardIdenticalAtOnce(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	release := a.Hold(t, 1<<62)
	s := h.New(t, time.Now)
	var sessions []*mcp.ClientSession
	for range 2 {
		cs, err := idemtest.Connect(context.Background(), a.server(idem.New(s, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions = append(sessions, cs)
	}
	time.AfterFunc(200*time.Millisecond, release)
	results := callAll(t, sessions, h.goroutines(8), "create", map[string]any{"title": "t"})
	for i, res := range results {
		if res != nil && numberOf(t, res) != 1 {
			t.Errorf("call %d answered %d, want the one create", i, numberOf(t, res))
		}
	}
	if a.Posts() != 1 {
		t.Fatalf("%d posts for identical calls at once, want 1", a.Posts())
	}
}

// guardUnknownOutcome: a create that may have landed (the API failed after
// it counted) is not posted again by a repeat, which is told
// unknown_outcome, as is get_operation's caller.
func guardUnknownOutcome(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	a.FailNext(http.StatusBadGateway, true) // it landed, and its answer says it failed
	cs, err := idemtest.Connect(context.Background(), a.server(idem.New(h.New(t, time.Now), nil), idem.OpID()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"title": "t", "op_id": "op-1"}
	for i := range 2 {
		res := callTool(t, cs, "create", args, nil)
		if code, _ := res.Meta[idem.MetaError].(string); !res.IsError || code != string(idem.CodeUnknownOutcome) {
			t.Fatalf("call %d: error %v, meta %v; want unknown_outcome", i, res.IsError, res.Meta)
		}
	}
	st := callTool(t, cs, "get_operation", map[string]any{"tool": "create", "op_id": "op-1"}, nil)
	if b, _ := json.Marshal(st.StructuredContent); string(b) != `{"status":"unknown"}` {
		t.Fatalf("get_operation: %s, want unknown", b)
	}
	if a.Posts() != 1 {
		t.Fatalf("%d posts, want 1: an unknown outcome is not posted again", a.Posts())
	}
}

// guardAbandonedClaimSettled: a claim whose handler outlived its lease
// (as one whose process died) is an unknown outcome to a repeat on
// another guard, which reconciles it as not done and posts; the first
// handler's late answer is fenced off, and a repeat gets the second
// answer.
func guardAbandonedClaimSettled(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	release := a.Hold(t, 1) // the first create only
	clock := NewClock(time.Now())
	s := h.New(t, clock.Now)
	opts := &idem.Options{Lease: time.Minute, Now: clock.Now}
	notDone := idem.Reconcile(func(context.Context, *mcp.CallToolRequest, idem.Pending) (*mcp.CallToolResult, error) {
		return nil, idem.NotDone(errors.New("not there"))
	})
	args := &mcp.CallToolParams{Name: "create", Arguments: map[string]any{"title": "t"}}
	slow, err := idemtest.Connect(context.Background(), a.server(idem.New(s, opts), notDone), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := slow.CallTool(context.Background(), args)
		first <- res
	}()
	for deadline := time.Now().Add(10 * time.Second); a.Posts() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first create never reached the API")
		}
	}
	clock.Advance(2 * time.Minute) // the first claim's lease has passed
	other, err := idemtest.Connect(context.Background(), a.server(idem.New(s, opts), notDone), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	second := numberOf(t, callTool(t, other, "create", args.Arguments.(map[string]any), nil))
	if a.Posts() != 2 {
		t.Fatalf("%d creates after the repeat, want 2: reconcile said the first was not made", a.Posts())
	}
	release()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first call never answered")
	}
	again := callTool(t, other, "create", args.Arguments.(map[string]any), nil)
	if n := numberOf(t, again); n != second || again.Meta[idem.MetaReplayed] != true {
		t.Fatalf("a repeat answered issue %d (replayed %v), want the second run's issue %d replayed", n, again.Meta[idem.MetaReplayed], second)
	}
}

// guardAnswerExpires: a repeat within the TTL gets the first answer; after
// it, the call runs again.
func guardAnswerExpires(t *testing.T, h Harness) {
	a := newOutsideAPI(t)
	clock := NewClock(time.Now())
	cs, err := idemtest.Connect(context.Background(), a.server(idem.New(h.New(t, clock.Now), &idem.Options{TTL: time.Hour, Now: clock.Now})), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"title": "t"}
	for i, step := range []time.Duration{0, 59 * time.Minute, 2 * time.Minute} {
		clock.Advance(step)
		if n, want := numberOf(t, callTool(t, cs, "create", args, nil)), []int{1, 1, 2}[i]; n != want {
			t.Fatalf("after %v more: answered %d, want %d", step, n, want)
		}
	}
}
