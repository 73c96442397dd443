package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/storeurl"
	"github.com/idemkit/sdk/internal/storeurl/storeurltest"
)

// A harness is the focus server on one fresh store, with its clock at
// demoNow (16:40 on 2026-03-02).
type harness struct {
	t     *testing.T
	ctx   context.Context
	store idem.Store
	srv   *mcp.Server
	f     *focus
	user  string // the user every call is made as; "" as over stdio
	url   string // the HTTP endpoint, once overHTTP served it
	now   func() time.Time
}

// eachStore runs fn on a fresh store of every kind (storeurltest.Names),
// each as its own subtest.
func eachStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, name := range storeurltest.Names {
		t.Run(name, func(t *testing.T) {
			fn(t, newHarness(t, name))
		})
	}
}

func newHarness(t *testing.T, name string) *harness {
	return newHarnessAt(t, name, func() time.Time { return demoNow })
}

// newHarnessAt is newHarness with the server's clock now.
func newHarnessAt(t *testing.T, name string, now func() time.Time) *harness {
	t.Helper()
	ctx := t.Context()
	s, closeStore, err := storeurl.Open(ctx, storeurltest.Fresh(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	srv, f := newFocus(s, Config{Now: now})
	return &harness{t: t, ctx: ctx, store: s, srv: srv, f: f, now: now}
}

// asUser returns a harness on the same store whose calls are made as user,
// as the bearer-token check does over HTTP: so cases can share one store
// without seeing each other's records.
func (h *harness) asUser(t *testing.T, user string) *harness {
	srv, f := newFocus(h.store, Config{Now: h.now})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok {
				if r.Extra == nil {
					r.Extra = &mcp.RequestExtra{}
				}
				r.Extra.TokenInfo = &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}
			}
			return next(ctx, method, req)
		}
	})
	return &harness{t: t, ctx: h.ctx, store: h.store, srv: srv, f: f, user: user, now: h.now}
}

// owned returns keys as keys of h's user.
func (h *harness) owned(keys []idem.Key) []idem.Key {
	out := make([]idem.Key, len(keys))
	for i, k := range keys {
		k.Owner = h.user
		out[i] = k
	}
	return out
}

// overHTTP serves h's server over streamable HTTP on loopback, stateless
// as -http serves it, behind an HTTPDropper whose Arm makes the next call
// of a tool lose its answer after the commit.
func (h *harness) overHTTP() *idemtest.HTTPDropper {
	h.t.Helper()
	l := &idemtest.HTTPDropper{Next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.srv }, &mcp.StreamableHTTPOptions{Stateless: true})}
	hs := httptest.NewServer(l)
	h.t.Cleanup(hs.Close)
	h.url = hs.URL
	return l
}

// connectHTTP opens a new client session over HTTP (overHTTP first),
// closed when the test ends.
func (h *harness) connectHTTP() *mcp.ClientSession {
	h.t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(h.ctx, &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// ticking is a clock that starts at demoNow and moves a second each time
// it is read, as a real one moves between a call and its retry.
func ticking() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return demoNow.Add(time.Duration(n.Add(1)) * time.Second) }
}

// connect opens a new client connection, closed when the test ends.
func (h *harness) connect() *mcp.ClientSession {
	h.t.Helper()
	cs, err := idemtest.Connect(h.ctx, h.srv, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// call sends one call and fails the test if the client raised an error.
func (h *harness) call(cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	res, err := cs.CallTool(h.ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok is call that fails the test on a tool error.
func (h *harness) ok(cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	res := h.call(cs, tool, args)
	if res.IsError {
		h.t.Fatalf("%s: %s", tool, text(res))
	}
	return res
}

// doc reads the document at k as raw JSON; "" when absent.
func (h *harness) doc(k idem.Key) string {
	h.t.Helper()
	var raw json.RawMessage
	err := h.store.Run(h.ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, &raw)
		return err
	})
	if errors.Is(err, idem.ErrNotFound) {
		return ""
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return string(raw)
}

// session reads a stored session of the user owner.
func (h *harness) session(owner, id string) Session {
	h.t.Helper()
	var s Session
	raw := h.doc(idem.Key{Owner: owner, Collection: colSessions, ID: id})
	if raw == "" {
		h.t.Fatalf("no session %s", id)
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// snapshot reads every document a scenario touches, as raw JSON.
func (h *harness) snapshot(keys []idem.Key) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		out[k.String()] = h.doc(k)
	}
	return out
}

// text returns the first text block of res.
func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// structured decodes res's structured content into out.
func structured(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// codeOf returns the error code of a refused call, or "".
func codeOf(res *mcp.CallToolResult) string {
	c, _ := res.Meta[idem.MetaError].(string)
	return c
}

// candidateIDs returns the ids of an ambiguous_target refusal's candidates.
func candidateIDs(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	raw, _ := json.Marshal(res.Meta["io.idemkit/candidates"])
	var cs []idem.Candidate
	if err := json.Unmarshal(raw, &cs); err != nil {
		t.Fatalf("candidates %s: %v", raw, err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func start(device, id, at string) map[string]any {
	m := map[string]any{"device": device, "label": "focus on " + device}
	if id != "" {
		m["session_id"] = id
	}
	if at != "" {
		m["started_at"] = at
	}
	return m
}

// at is a time on the demo's day, as RFC 3339.
func at(hm string) string { return "2026-03-02T" + hm + ":00Z" }
