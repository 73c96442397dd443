package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/storeurl"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
)

// The tests in this file run the tools through a go-sdk client on every
// store, with the social service on loopback counting what was posted.

// env is one server on a fresh store, with its social service.
type env struct {
	t      *testing.T
	name   string // the kind of store
	ctx    context.Context
	store  idem.Store
	social *Social
	a      *app
	srv    *mcp.Server
}

func newEnv(t *testing.T, name string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	s, closeStore, err := storeurl.Open(ctx, storeurltest.Fresh(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	social := NewSocial()
	hs := httptest.NewServer(social)
	t.Cleanup(hs.Close)
	a := newApp(s, newPoster(hs.URL), slog.New(slog.NewTextHandler(io.Discard, nil)), 0, 0)
	return &env{t: t, name: name, ctx: ctx, store: s, social: social, a: a, srv: a.server()}
}

// onEveryStore runs fn on a fresh server per kind of store, the stores in
// parallel (most of the time is spent waiting for the services).
func onEveryStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, name := range storeurltest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, name))
		})
	}
}

func (e *env) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cs, err := idemtest.Connect(e.ctx, e.srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// send sends one call, and again while it is refused as contended or busy
// (what those codes ask a client to do).
func send(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return nil, err
		}
		code := res.Meta[idem.MetaError]
		if (code != string(idem.CodeContended) && code != string(idem.CodeBusy)) || attempt == 20 {
			return res, nil
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

// call is send, failing t on a transport error.
func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := send(ctx, cs, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok is call for a call that must succeed.
func ok(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, ctx, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s refused: %v %s", tool, res.Meta[idem.MetaError], text(res))
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// view reads the story with get_story.
func (e *env) view(t *testing.T, cs *mcp.ClientSession, slug string) StoryView {
	t.Helper()
	var v StoryView
	if err := remarshal(ok(t, e.ctx, cs, "get_story", map[string]any{"slug": slug}).StructuredContent, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// snapshot is everything a repeat must leave unchanged: the versions of
// the story's three documents, what get_story reads, and what the social
// service got.
type snapshot struct {
	Versions [3]idem.Version
	View     StoryView
	Requests int
	Repeats  int
	Posts    []Post
}

func (e *env) snapshot(t *testing.T, cs *mcp.ClientSession, slug string) snapshot {
	t.Helper()
	var s snapshot
	err := e.store.Run(e.ctx, func(ctx context.Context, tx idem.Tx) error {
		for i, coll := range []string{storiesCollection, reprosCollection, checksCollection} {
			v, err := tx.Get(ctx, storyKey("", coll, slug), nil)
			if err != nil && !errors.Is(err, idem.ErrNotFound) {
				return err
			}
			s.Versions[i] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.View = e.view(t, cs, slug)
	st := e.social.Stats()
	s.Requests, s.Repeats, s.Posts = st.Requests, st.Repeats, st.Posts
	return s
}

func sameSnapshot(t *testing.T, what string, a, b snapshot) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("%s changed what is stored or posted:\nbefore %s\nafter  %s", what, ja, jb)
	}
}

// A write is one call of each write tool, in an order where each makes
// sense: the story, a reproducer, an edit the reproducer is told of, a
// check.
type write struct {
	tool string
	args map[string]any
}

func writes(slug string) []write {
	return []write{
		{"publish_story", map[string]any{"slug": slug, "title": "Login loops", "body": "Reset, then sign in twice."}},
		{"report_reproduction", map[string]any{"slug": slug, "handle": "@ana", "note": "on Firefox"}},
		{"edit_story", map[string]any{"slug": slug, "revision": 1, "body": "Reset, then sign in twice within a minute."}},
		{"report_check", map[string]any{"slug": slug, "handle": "@ben", "result": "pass"}},
	}
}

// withOpID returns args with op_id set.
func withOpID(args map[string]any, opID string) map[string]any {
	m := map[string]any{"op_id": opID}
	for k, v := range args {
		m[k] = v
	}
	return m
}

// checkOnce fails t unless the story holds what one run of writes(slug)
// leaves: revision 2, one reproducer, one check, and one announcement, one
// reproduction notice and one revision notice posted, each by one request.
func (e *env) checkOnce(t *testing.T, cs *mcp.ClientSession, slug string) {
	t.Helper()
	v := e.view(t, cs, slug)
	if v.Revision != 2 || len(v.Revisions) != 2 || v.Reproductions != 1 || len(v.Checks) != 1 {
		t.Errorf("story: revision %d (%d revisions), %d reproductions, %d checks; want 2, 2, 1, 1", v.Revision, len(v.Revisions), v.Reproductions, len(v.Checks))
	}
	for _, p := range v.Posts {
		if p.State != "done" {
			t.Errorf("post %s %s: state %s, want done", p.Kind, p.About, p.State)
		}
	}
	var kinds []string
	for _, p := range e.social.Stats().Posts {
		if p.Story == slug {
			kinds = append(kinds, p.Kind)
		}
	}
	slices.Sort(kinds)
	if want := []string{"announcement", "reproduction", "revision"}; !slices.Equal(kinds, want) {
		t.Errorf("posts of %s: %v, want %v", slug, kinds, want)
	}
	if st := e.social.Stats(); st.Repeats != 0 {
		t.Errorf("the social service got %d requests with a key it had seen: something was sent twice", st.Repeats)
	}
}

// TestSendTwice sends every write tool twice in a row, as a client that did
// not get the first answer would: the same answer, and nothing stored or
// posted changes with the second call. The second edit_story is an
// identical edit, so it writes nothing and notifies nobody.
func TestSendTwice(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		cs := e.connect(t)
		for _, w := range writes("twice") {
			first := ok(t, e.ctx, cs, w.tool, w.args)
			before := e.snapshot(t, cs, "twice")
			second := ok(t, e.ctx, cs, w.tool, w.args)
			if err := idemtest.SameAnswer(first, second); err != nil {
				t.Errorf("%s: %v", w.tool, err)
			}
			sameSnapshot(t, w.tool+" sent again", before, e.snapshot(t, cs, "twice"))
		}
		e.checkOnce(t, cs, "twice")
	})
}

// TestDropAndRetry loses the answer to every write tool after the server
// committed, reconnects and sends the call again: nothing stored or posted
// changes with the retry. With an op id the retry is answered from the
// stored result without running the handler; with the record keys alone
// the handler runs and writes nothing.
func TestDropAndRetry(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		for _, withOp := range []bool{false, true} {
			slug := "keyed"
			if withOp {
				slug = "with-op-id"
			}
			var cs *mcp.ClientSession
			for i, w := range writes(slug) {
				args := w.args
				if withOp {
					args = withOpID(args, fmt.Sprintf("op-%d", i))
				}
				drop := &idemtest.Dropper{Tool: w.tool}
				lost, err := idemtest.Connect(e.ctx, e.srv, drop.Wrap)
				if err != nil {
					t.Fatal(err)
				}
				ran := e.a.ran(w.tool)
				if _, err := lost.CallTool(e.ctx, &mcp.CallToolParams{Name: w.tool, Arguments: args}); err == nil || drop.Dropped() != 1 {
					t.Fatalf("%s: the answer was not lost (%v)", w.tool, err)
				}
				lost.Close()
				cs = e.connect(t)
				before := e.snapshot(t, cs, slug)
				ranFirst := e.a.ran(w.tool) - ran
				res := ok(t, e.ctx, cs, w.tool, args)
				sameSnapshot(t, w.tool+" retried", before, e.snapshot(t, cs, slug))
				if withOp {
					if res.Meta[idem.MetaReplayed] != true {
						t.Errorf("%s retried with its op id: not replayed", w.tool)
					}
					if n := e.a.ran(w.tool) - ran - ranFirst; n != 0 {
						t.Errorf("%s retried with its op id: the handler ran %d more times", w.tool, n)
					}
				}
			}
			e.checkOnce(t, cs, slug)
		}
	})
}

// storm sends each call at once, each on a connection of its own, and
// returns the answers. On the Firestore emulator at most 4 are in flight:
// the emulator locks what a transaction reads and answers contention with
// lock timeouts, so 16 read-then-write transactions on one document can
// wait out the test's deadline (docs/stores.md: the conformance suite
// runs its contention cases at 4 there too).
func (e *env) storm(t *testing.T, tool string, calls []map[string]any) []*mcp.CallToolResult {
	t.Helper()
	out := e.sendAll(t, tool, calls)
	for i, res := range out {
		if res != nil && res.IsError {
			t.Errorf("%s call %d refused: %v %s", tool, i, res.Meta[idem.MetaError], text(res))
		}
	}
	return out
}

// sendAll is storm without its check that no call was refused.
func (e *env) sendAll(t *testing.T, tool string, calls []map[string]any) []*mcp.CallToolResult {
	t.Helper()
	inFlight := make(chan struct{}, len(calls))
	if e.name == "firestore" {
		inFlight = make(chan struct{}, 4)
	}
	out := make([]*mcp.CallToolResult, len(calls))
	sessions := make([]*mcp.ClientSession, len(calls))
	for i := range sessions {
		sessions[i] = e.connect(t)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, args := range calls {
		wg.Go(func() {
			<-start
			inFlight <- struct{}{}
			defer func() { <-inFlight }()
			res, err := send(e.ctx, sessions[i], tool, args)
			if err != nil {
				t.Errorf("%s: %v", tool, err)
				return
			}
			out[i] = res
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestReproductionStorm sends 16 report_reproduction at once with distinct
// handles (count 16, 16 notices to the author), then 16 at once with one
// handle on another story (count 1, one notice).
func TestReproductionStorm(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		cs := e.connect(t)
		for _, slug := range []string{"many", "one"} {
			ok(t, e.ctx, cs, "publish_story", map[string]any{"slug": slug, "title": "T", "body": "B"})
		}
		distinct := make([]map[string]any, 16)
		same := make([]map[string]any, 16)
		for i := range distinct {
			distinct[i] = map[string]any{"slug": "many", "handle": fmt.Sprintf("@r%02d", i)}
			same[i] = map[string]any{"slug": "one", "handle": "@solo", "note": fmt.Sprintf("try %d", i)}
		}
		e.storm(t, "report_reproduction", distinct)
		e.storm(t, "report_reproduction", same)
		notices := map[string]int{}
		for _, p := range e.social.Stats().Posts {
			if p.Kind == "reproduction" {
				notices[p.Story]++
			}
		}
		for slug, want := range map[string]int{"many": 16, "one": 1} {
			if got := e.view(t, cs, slug).Reproductions; got != want {
				t.Errorf("%s: count %d, want %d", slug, got, want)
			}
			if notices[slug] != want {
				t.Errorf("%s: %d notices to the author, want %d", slug, notices[slug], want)
			}
		}
		if st := e.social.Stats(); st.Requests != 2+16+1 || st.Repeats != 0 {
			t.Errorf("the social service got %d requests (%d with a known key), want 19, none repeated", st.Requests, st.Repeats)
		}
	})
}

// TestPublishStorm sends 16 publish_story of one new slug at once: one
// story, one announcement, sent by one request, and every caller gets the
// same answer.
func TestPublishStorm(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		calls := make([]map[string]any, 16)
		for i := range calls {
			calls[i] = map[string]any{"slug": "launch", "title": "Launch day", "body": "It went fine."}
		}
		answers := e.storm(t, "publish_story", calls)
		for i, res := range answers {
			if res != nil {
				if err := idemtest.SameAnswer(answers[0], res); err != nil {
					t.Errorf("answer %d: %v", i, err)
				}
			}
		}
		st := e.social.Stats()
		if st.Count("announcement") != 1 || st.Requests != 1 {
			t.Errorf("%d announcements in %d requests, want 1 in 1", st.Count("announcement"), st.Requests)
		}
		v := e.view(t, e.connect(t), "launch")
		if len(v.Posts) != 1 || v.Posts[0].State != "done" || v.Posts[0].Ref != "social:"+st.Posts[0].ID {
			t.Errorf("get_story posts %+v, want the announcement done with the social service's ref", v.Posts)
		}
	})
}

// TestFailedPostIsReleased makes the social service refuse the first
// announcement: the story is saved, its announcement stays pending, and
// the next publish of the story posts it, once.
func TestFailedPostIsReleased(t *testing.T) {
	onEveryStore(t, func(t *testing.T, e *env) {
		cs := e.connect(t)
		args := map[string]any{"slug": "flaky", "title": "Flaky", "body": "Sometimes."}
		e.social.FailNext(1)
		ok(t, e.ctx, cs, "publish_story", args)
		v := e.view(t, cs, "flaky")
		if len(v.Posts) != 1 || v.Posts[0].State != "pending" {
			t.Fatalf("after a refused post: posts %+v, want the announcement pending", v.Posts)
		}
		ok(t, e.ctx, cs, "publish_story", args)
		ok(t, e.ctx, cs, "publish_story", args)
		v = e.view(t, cs, "flaky")
		st := e.social.Stats()
		if len(v.Posts) != 1 || v.Posts[0].State != "done" || st.Count("announcement") != 1 || st.Requests != 2 {
			t.Errorf("after republishing: posts %+v, %d announcements in %d requests; want done, 1 in 2", v.Posts, st.Count("announcement"), st.Requests)
		}
	})
}

// TestHintsSaidOnEveryTool: every tool says whether it destroys what was
// there and whether it reaches past the server (MCP reads an absent
// destructiveHint or openWorldHint as true): the story tools that post or
// notify say openWorldHint true, the others false.
func TestHintsSaidOnEveryTool(t *testing.T) {
	e := newEnv(t, "memory")
	lr, err := e.connect(t).ListTools(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	openWorld := map[string]bool{"publish_story": true, "report_reproduction": true, "edit_story": true}
	for _, tl := range lr.Tools {
		a := tl.Annotations
		if a == nil || a.OpenWorldHint == nil || (!a.ReadOnlyHint && a.DestructiveHint == nil) {
			t.Errorf("%s: annotations %+v leave a hint unsaid", tl.Name, a)
			continue
		}
		if *a.OpenWorldHint != openWorld[tl.Name] {
			t.Errorf("%s: openWorldHint %v, want %v", tl.Name, *a.OpenWorldHint, openWorld[tl.Name])
		}
	}
}
