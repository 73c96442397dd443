package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/sqlite"
)

// trackerBin is the command, built once per test run (TestMain removes it).
var trackerBin = &testenv.Binary{Pkg: "."}

func TestMain(m *testing.M) {
	extest.Main(m, "", run, trackerBin)
}

const testToken = "test-token"

// harness is the server as -http serves it (stateless, a server built for
// every request, exserve's limits), behind a dropper that can lose an
// answer, in front of a fake tracker on loopback, on a SQLite store.
type harness struct {
	fake  *fakeTracker
	app   *app
	clock *demoClock
	loss  *idemtest.HTTPDropper
	url   string
	hc    *http.Client
}

// options of a harness.
type options struct {
	unguarded bool          // serve the tools without the guard, to show what it prevents
	lease     time.Duration // 0: the default
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	clock := &demoClock{}
	fake := newFakeTracker(testToken, clock.now)
	api := httptest.NewServer(fake)
	t.Cleanup(api.Close)
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "tracker.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := newApp(s, config{API: api.URL, Token: testToken, Lease: o.lease, Now: clock.now})
	h := a.handler()
	if o.unguarded {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
			a.built.Add(1)
			srv := mcp.NewServer(&mcp.Implementation{Name: "unguarded", Version: "v0"}, nil)
			a.addTools(srv)
			return srv
		}, &mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: -1})
	}
	loss := &idemtest.HTTPDropper{Next: exserve.DefaultLimits().Endpoint(h, nil)}
	hs := httptest.NewServer(loss)
	t.Cleanup(hs.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &harness{fake: fake, app: a, clock: clock, loss: loss, url: hs.URL + exserve.Path, hc: &http.Client{Transport: tr}}
}

// ctxFor is a test's context: every wait ends within it.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call sends one call on a connection of its own, as a client that
// reconnects does.
func (h *harness) call(ctx context.Context, tool string, args any) (*mcp.CallToolResult, error) {
	return callAt(ctx, h.url, h.hc, tool, args)
}

// callAt sends one call to the MCP endpoint url on a connection of its own.
func callAt(ctx context.Context, url string, hc *http.Client, tool string, args any) (*mcp.CallToolResult, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "tracker-test", Version: "v0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// mustCall is call, failing t on a transport or protocol error.
func (h *harness) mustCall(t *testing.T, ctx context.Context, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.call(ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// atOnce sends n copies of one call at once, each on its own connection.
func (h *harness) atOnce(t *testing.T, ctx context.Context, n int, tool string, args any) []*mcp.CallToolResult {
	t.Helper()
	answers := make([]*mcp.CallToolResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := h.call(ctx, tool, args)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			answers[i] = res
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return answers
}

func codeOf(res *mcp.CallToolResult) string {
	c, _ := res.Meta[idem.MetaError].(string)
	return c
}

func replayed(res *mcp.CallToolResult) bool { return res.Meta[idem.MetaReplayed] == true }

// issueOf decodes an answer that is an issue, failing t on an error result.
func issueOf(t *testing.T, res *mcp.CallToolResult) Issue {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result (code %q): %v", codeOf(res), textOf(res))
	}
	var is Issue
	if err := remarshal(res.StructuredContent, &is); err != nil || is.Number == 0 {
		t.Fatalf("not an issue: %v (%v)", res.StructuredContent, err)
	}
	return is
}

func textOf(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// seed makes an issue in repo directly, as someone using the tracker does.
func (f *fakeTracker) seed(repo, title string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[repo]
	r.issues = append(r.issues, Issue{Number: len(r.issues) + 1, Title: title, State: "open", CreatedAt: f.now().UTC().Truncate(time.Second)})
}
