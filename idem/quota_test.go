package idem_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/store/memory"
	"github.com/idemkit/sdk/store/sqlite"
)

// page is what the quota tests' tool stores and answers: about 1 KB.
type page struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
}

// TestMaxStoredBytes: a scope's calls store answers until the next would
// pass the bound; that one is refused quota_exceeded with when to retry,
// and its write rolls back. A replay is still answered, another scope is
// not held back, and once the answers expire the scope stores again.
func TestMaxStoredBytes(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			ctx := ctxFor(t)
			clock := newFakeClock()
			var s idem.Store = memory.New(&memory.Options{Now: clock.now})
			if kind == "sqlite" {
				db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), &sqlite.Options{Now: clock.now})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				s = db
			}
			guard := idem.New(s, &idem.Options{TTL: time.Hour, Now: clock.now, MaxStoredBytes: 10_000,
				Scope: func(ctx context.Context, req *mcp.CallToolRequest) string {
					u, _ := req.Params.Meta["test/user"].(string)
					return u
				}})
			srv := mcp.NewServer(&mcp.Implementation{Name: "pages", Version: "v1"}, nil)
			idem.AddTool(srv, &mcp.Tool{Name: "save_page", Description: "Save a page."}, guard,
				func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in page) (*mcp.CallToolResult, page, error) {
					in.Text = strings.Repeat("p", 1000)
					return nil, in, tx.Create(ctx, idem.Key{Collection: "pages", ID: in.ID}, in)
				}, idem.RequireOpID())
			cs := connect(t, srv)
			save := func(user, id string) *mcp.CallToolResult {
				t.Helper()
				p := call("save_page", map[string]any{"id": id, "op_id": "op-" + id})
				p.Meta = mcp.Meta{"test/user": user}
				res, err := cs.CallTool(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			saved := 0
			var refused *mcp.CallToolResult
			for i := range 20 {
				if i == 5 {
					clock.add(40 * time.Minute)
				}
				res := save("alice", fmt.Sprint("a", i))
				if res.IsError {
					refused = res
					break
				}
				saved++
			}
			// Each answer keeps its structured content, about 1,040 bytes
			// (its text content is made from it on a replay): nine fit
			// under 10,000 bytes.
			if saved != 9 || refused == nil || codeOf(refused) != string(idem.CodeQuotaExceeded) {
				t.Fatalf("alice saved %d pages before a refusal %v; want 9, then quota_exceeded", saved, refused)
			}
			// The first five expire 20 minutes on, and their bucket ends
			// within a sixteenth of the TTL after that.
			if msg := textOf(refused); !strings.Contains(msg, "retry in 2") {
				t.Fatalf("refusal %q does not say when to retry (in 20 to 24 minutes)", msg)
			}
			var n int
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				_, err := tx.Get(ctx, idem.Key{Collection: "pages", ID: "a9"}, &page{})
				if err == nil {
					n++
				} else if err != idem.ErrNotFound {
					return err
				}
				return nil
			}); err != nil || n != 0 {
				t.Fatalf("the refused call's page is stored (%d, %v)", n, err)
			}
			if res := save("alice", "a0"); res.IsError || res.Meta[idem.MetaReplayed] != true {
				t.Fatalf("a replay at the bound: %v %v, want the stored answer", codeOf(res), textOf(res))
			}
			if res := save("bob", "b0"); res.IsError {
				t.Fatalf("bob is refused for alice's answers: %v", textOf(res))
			}
			clock.add(25 * time.Minute) // the first five answers and their bucket have expired
			if res := save("alice", "a10"); res.IsError {
				t.Fatalf("alice refused after her first answers expired: %v %v", codeOf(res), textOf(res))
			}
		})
	}
}

// TestMaxStoredBytesGuarded: a guarded tool's call is refused before its
// handler runs once its scope holds the bound, so nothing reaches the API;
// its answers, whose effects happened, are kept and replayed.
func TestMaxStoredBytesGuarded(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guard := idem.New(memory.New(nil), &idem.Options{MaxStoredBytes: 600})
	cs := connect(t, trackerServer(tr, guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))
	var codes []string
	for i := range 8 {
		res, err := cs.CallTool(ctx, call("create_issue", map[string]any{"title": fmt.Sprint("issue ", i), "op_id": fmt.Sprint("op-", i)}))
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, codeOf(res))
	}
	refusedAt := -1
	for i, c := range codes {
		if c == string(idem.CodeQuotaExceeded) {
			refusedAt = i
			break
		}
		if c != "" {
			t.Fatalf("call %d answered %q", i, c)
		}
	}
	// A call keeps its arguments (about 20 bytes) and its answer (about
	// 170): three fit under 600 bytes.
	if refusedAt != 3 || tr.Posts() != 3 {
		t.Fatalf("codes %q with %d posts; want three answers, then quota_exceeded and no more posts", codes, tr.Posts())
	}
	res, err := cs.CallTool(ctx, call("create_issue", map[string]any{"title": "issue 0", "op_id": "op-0"}))
	if err != nil || res.IsError || int(tr.Posts()) != refusedAt {
		t.Fatalf("the first answer's replay at the bound: %v %v, %d posts", err, codeOf(res), tr.Posts())
	}
}

// TestMaxStoredBytesGuardedArgsFreed: a guarded call's claim counts its
// arguments, kept for a reconcile, until the claim is settled: an answer
// (which keeps only its result) or a refusal that certainly did not act
// (which keeps nothing) gives them back. Under 1,500 bytes, calls of 600
// bytes of arguments and an answer of about 170 fit several at a time, one
// after another; were the arguments still counted, the third would not.
func TestMaxStoredBytesGuardedArgsFreed(t *testing.T) {
	ctx := ctxFor(t)
	tr := newTracker(t)
	guard := idem.New(memory.New(nil), &idem.Options{MaxStoredBytes: 1500})
	cs := connect(t, trackerServer(tr, guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))
	body := strings.Repeat("b", 600)
	for i, title := range []string{"", "", "", "one", "two", "three"} { // no title: the tracker refuses, NotDone
		res, err := cs.CallTool(ctx, call("create_issue", map[string]any{"title": title, "body": body, "op_id": fmt.Sprint("op-", i)}))
		if err != nil {
			t.Fatal(err)
		}
		if code := codeOf(res); code != "" || res.IsError != (title == "") {
			t.Fatalf("call %d (title %q): code %q, isError %v; want the tracker's answer", i, title, code, res.IsError)
		}
	}
	if tr.Created() != 3 || tr.Posts() != 6 {
		t.Fatalf("%d issues made of %d posts, want 3 of 6", tr.Created(), tr.Posts())
	}
}

// TestMaxStoredBytesAtOnce: calls of one scope at once never store past
// the bound together: of 16 saves of about 1 KB under 10,000 bytes,
// exactly nine are answered and the others refused quota_exceeded.
func TestMaxStoredBytesAtOnce(t *testing.T) {
	ctx := ctxFor(t)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, s := range []idem.Store{memory.New(nil), db} {
		guard := idem.New(s, &idem.Options{MaxStoredBytes: 10_000})
		srv := mcp.NewServer(&mcp.Implementation{Name: "pages", Version: "v1"}, nil)
		idem.AddTool(srv, &mcp.Tool{Name: "save_page", Description: "Save a page."}, guard,
			func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in page) (*mcp.CallToolResult, page, error) {
				in.Text = strings.Repeat("p", 1000)
				return nil, in, tx.Put(ctx, idem.Key{Collection: "pages", ID: in.ID}, in)
			}, idem.RequireOpID())
		cs := connect(t, srv)
		codes := make(chan string, 16)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				res, err := cs.CallTool(ctx, call("save_page", map[string]any{"id": fmt.Sprint(i), "op_id": fmt.Sprint("op-", i)}))
				if err != nil {
					codes <- err.Error()
					return
				}
				codes <- codeOf(res)
			})
		}
		wg.Wait()
		close(codes)
		count := map[string]int{}
		for c := range codes {
			count[c]++
		}
		if count[""] != 9 || count[string(idem.CodeQuotaExceeded)] != 7 {
			t.Fatalf("%T: answers by code %v; want 9 answered and 7 quota_exceeded", s, count)
		}
	}
}

// scopeSpy is a real store that notes the scope each Run is for.
type scopeSpy struct {
	idem.Store
	mu   sync.Mutex
	seen []string
}

func (s *scopeSpy) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	s.mu.Lock()
	s.seen = append(s.seen, backend.ScopeOf(ctx))
	s.mu.Unlock()
	return s.Store.Run(ctx, fn)
}

// TestRunsCarryTheScope: every transaction of a call, with an op id or
// without, and a guarded call's claim and answer, runs for the caller's
// scope (backend.WithScope), so that a store's writer can take turns by
// caller.
func TestRunsCarryTheScope(t *testing.T) {
	ctx := ctxFor(t)
	spy := &scopeSpy{Store: memory.New(nil)}
	guard := idem.New(spy, &idem.Options{Scope: func(ctx context.Context, req *mcp.CallToolRequest) string {
		u, _ := req.Params.Meta["test/user"].(string)
		return u
	}})
	tr := newTracker(t)
	srv := trackerServer(tr, guard, idem.Tools{"create_issue": {idem.RequireOpID()}})
	idem.AddTool(srv, &mcp.Tool{Name: "save_page", Description: "Save a page."}, guard,
		func(ctx context.Context, tx idem.Tx, _ *mcp.CallToolRequest, in page) (*mcp.CallToolResult, page, error) {
			return nil, in, tx.Put(ctx, idem.Key{Collection: "pages", ID: in.ID}, in)
		}, idem.OpID())
	cs := connect(t, srv)
	for _, p := range []*mcp.CallToolParams{
		call("save_page", map[string]any{"id": "1", "op_id": "op-1"}),
		call("save_page", map[string]any{"id": "2"}),
		call("create_issue", map[string]any{"title": "t", "op_id": "op-2"}),
	} {
		p.Meta = mcp.Meta{"test/user": "alice"}
		if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", p.Name, err, codeOf(res))
		}
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.seen) < 4 {
		t.Fatalf("%d transactions, want at least 4 (two calls, a claim, an answer)", len(spy.seen))
	}
	for i, s := range spy.seen {
		if s != "alice" {
			t.Fatalf("transaction %d ran for scope %q, want alice's: %q", i, s, spy.seen)
		}
	}
}
