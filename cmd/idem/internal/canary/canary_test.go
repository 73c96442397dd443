package canary_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/cmd/idem/internal/canary"
	"github.com/idemkit/sdk/idemclient"
	"github.com/idemkit/sdk/store/memory"
)

// start serves a canary on a memory store for the test.
func start(t *testing.T, d canary.Config) (*canary.Server, string) {
	t.Helper()
	c, err := canary.NewServer(memory.New(nil), d)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)
	return c, hs.URL
}

var defaults = canary.Config{Drop: canary.DropReset, Annotations: canary.Declared}

// matrix runs every case with policy and returns the records by case.
func matrix(t *testing.T, policy string) map[string]canary.Record {
	t.Helper()
	_, base := start(t, defaults)
	p, err := canary.PolicyNamed(policy)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]canary.Record{}
	r := &canary.Runner{Base: base, Policy: p}
	if err := r.Run(context.Background(), canary.Cases, func(rec canary.Record) { recs[rec.Case] = rec }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(canary.Cases) {
		t.Fatalf("%d records for %d cases", len(recs), len(canary.Cases))
	}
	return recs
}

type want struct {
	invocations, replays int
	state, result        string
	verdict              string
}

func check(t *testing.T, recs map[string]canary.Record, wants map[string]want) {
	t.Helper()
	for name, w := range wants {
		r := recs[name]
		if r.ServerInvocations != w.invocations || r.ReplayInvocations != w.replays || r.ExternalState != w.state ||
			!strings.HasPrefix(r.ClientResult, w.result) || r.Verdict != w.verdict {
			t.Errorf("%s: ran %d, replayed %d, state %q, result %q, verdict %s (%s); want %d, %d, %q, %q…, %s",
				name, r.ServerInvocations, r.ReplayInvocations, r.ExternalState, r.ClientResult, r.Verdict, r.Why,
				w.invocations, w.replays, w.state, w.result, w.verdict)
		}
	}
}

// With the safe-retry client every case passes: the unsafe tool runs once
// and ends in an unknown outcome that get_operation reconciles as
// committed, the idempotent tool is sent once more and changes the status
// once, the read-only one is sent once more, and the replacement server
// gets no replay.
func TestMatrixPassesWithSafeRetry(t *testing.T) {
	recs := matrix(t, "safe")
	for _, r := range recs {
		if r.Verdict != canary.Pass {
			t.Errorf("%s: %s: %s", r.Case, r.Verdict, r.Why)
		}
	}
	unknown := want{1, 0, "counter 1", "unknown outcome (op id sent", canary.Pass}
	check(t, recs, map[string]want{
		"unsafe-reset":         unknown,
		"unsafe-cut":           unknown,
		"unsafe-missing":       unknown,
		"unsafe-untrusted":     unknown,
		"idempotent-reset":     {2, 1, "1 status change(s)", "ok", canary.Pass},
		"idempotent-cut":       {2, 1, "1 status change(s)", "ok", canary.Pass},
		"idempotent-untrusted": {1, 0, "1 status change(s)", "unknown outcome (no op id", canary.Pass},
		"idempotent-missing":   {1, 0, "1 status change(s)", "unknown outcome (no op id", canary.Pass},
		"replacement":          {1, 0, "1 status change(s)", "unknown outcome (no op id", canary.Pass},
		"readonly-reset":       {2, 1, "unchanged: true", "ok", canary.Pass},
	})
	for _, name := range []string{"unsafe-reset", "unsafe-cut"} {
		if recs[name].Reconcile != string(idemclient.Committed) {
			t.Errorf("%s: reconcile %q, want committed", name, recs[name].Reconcile)
		}
	}
}

// A client that always resends is caught: the unsafe tool runs twice, and
// the untrusted, unannotated and replacement cases are replayed.
func TestMatrixCatchesAlwaysRetry(t *testing.T) {
	recs := matrix(t, "always")
	check(t, recs, map[string]want{
		"unsafe-reset":     {2, 1, "counter 2", "ok", canary.Fail},
		"unsafe-cut":       {2, 1, "counter 2", "ok", canary.Fail},
		"unsafe-untrusted": {2, 1, "counter 2", "ok", canary.Fail},
		"replacement":      {2, 1, "1 status change(s)", "ok", canary.Fail},
		"idempotent-reset": {2, 1, "1 status change(s)", "ok", canary.Pass},
	})
	if !strings.Contains(recs["unsafe-reset"].Why, "2 logical changes") {
		t.Errorf("unsafe-reset: why %q names no second change", recs["unsafe-reset"].Why)
	}
}

// A client that never resends is safe, but its answers to the safe
// controls are needless unknowns.
func TestMatrixMissesWithNeverRetry(t *testing.T) {
	recs := matrix(t, "never")
	check(t, recs, map[string]want{
		"unsafe-reset":     {1, 0, "counter 1", "error", canary.Pass},
		"idempotent-reset": {1, 0, "1 status change(s)", "error", canary.Miss},
		"readonly-reset":   {1, 0, "unchanged: true", "error", canary.Miss},
	})
}

// The two drops seen in the field, on the wire: a reset gives the client
// no byte of the answer; a cut gives it the headers and a body that ends
// early. Both commit first.
func TestDropModes(t *testing.T) {
	c, base := start(t, defaults)
	ctx := context.Background()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"increment_then_drop","arguments":{}}}`
	post := func(run, drop string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp/"+run+"?drop="+drop, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		return (&http.Client{Transport: &http.Transport{}}).Do(req)
	}

	resp, err := post("reset", "reset")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("reset: got status %s, want no answer at all", resp.Status)
	}
	resp, err = post("cut", "cut")
	if err != nil {
		t.Fatalf("cut: %v, want the headers", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil || bytes.Contains(body, []byte("counter")) {
		t.Fatalf("cut: status %s, body %q, read error %v; want 200, no answer, an error", resp.Status, body, err)
	}
	resp, err = post("cut", "cut") // the second call of the run is answered
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`\"counter\":2`)) && !bytes.Contains(body, []byte(`"counter":2`)) {
		t.Fatalf("second call answered %q, want counter 2", body)
	}
	for run, n := range map[string]int{"reset": 1, "cut": 2} {
		st, err := c.Stats(ctx, run)
		if err != nil || st.Counter != n || st.Invocations[canary.ToolIncrement] != n {
			t.Errorf("run %s: %+v, %v; want counter and invocations %d", run, st, err, n)
		}
	}
}

// connect returns a connect function to run of the canary at base.
func connect(base, run string) func(context.Context) (*mcp.ClientSession, error) {
	return func(ctx context.Context) (*mcp.ClientSession, error) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
		return cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/" + run, DisableStandaloneSSE: true}, nil)
	}
}

// Over HTTP, the lost increment ends in an unknown outcome whose message
// quotes no argument, and Reconcile says committed; an op id never sent is
// not_committed.
func TestReconcileOverHTTP(t *testing.T) {
	for _, drop := range []canary.Drop{canary.DropReset, canary.DropCut} {
		t.Run(string(drop), func(t *testing.T) {
			_, base := start(t, canary.Config{Drop: drop, Annotations: canary.Declared})
			ctx := context.Background()
			c := idemclient.New(connect(base, "r"), &idemclient.Options{Trusted: true})
			defer c.Close()
			const value = "private-note-4471"
			_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: canary.ToolIncrement, Arguments: canary.IncrementIn{Note: value}})
			var u *idemclient.UnknownOutcomeError
			if !errors.As(err, &u) {
				t.Fatalf("got %v, want an unknown outcome", err)
			}
			if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), u.OpID) {
				t.Fatalf("the message quotes an argument: %s", err)
			}
			if st, err := c.Reconcile(ctx, u.Tool, u.OpID); err != nil || st != idemclient.Committed {
				t.Fatalf("Reconcile = %q, %v; want committed", st, err)
			}
			if st, err := c.Reconcile(ctx, u.Tool, "op-never-sent"); err != nil || st != idemclient.NotCommitted {
				t.Fatalf("Reconcile of an unknown op id = %q, %v; want not_committed", st, err)
			}
		})
	}
}

// Bad run names and modes are refused and change nothing.
func TestBadRequests(t *testing.T) {
	c, base := start(t, defaults)
	for path, code := range map[string]int{
		"/":                     http.StatusNotFound,
		"/mcp/a%2Fb":            http.StatusNotFound,
		"/other/x":              http.StatusNotFound,
		"/mcp/x?drop=sometimes": http.StatusBadRequest,
		"/mcp/x?annotations=no": http.StatusBadRequest,
	} {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"increment_then_drop"}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, code)
		}
	}
	if st, _ := c.Stats(context.Background(), "x"); st.Counter != 0 || len(st.Dropped) != 0 {
		t.Errorf("a refused request changed run x: %+v", st)
	}
	if _, err := canary.NewServer(memory.New(nil), canary.Config{Drop: "later", Annotations: canary.Declared}); err == nil {
		t.Error("NewServer took an unknown drop mode")
	}
	resp, err := http.Get(base + "/stats/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st canary.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /stats/x: %s, %v", resp.Status, err)
	}
}
