package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/internal/mwlib"
	"github.com/idemkit/sdk/internal/oprecord"
)

// secret is an argument value that must never appear in an error a caller
// sees.
const secret = "SECRET-7f3a9c"

const opTTL = time.Hour

// mwFixture is a server with idemkit tools on one store, and counters of
// what its handlers did. The server is of the library the harness runs the
// middleware cases through (the go-sdk unless RunMiddleware names another).
type mwFixture struct {
	t     *testing.T
	lib   mwlib.Library
	store idem.Store
	clock *Clock
	srv   mwlib.Server

	execs    atomic.Int64 // add_note handler runs
	statuses atomic.Int64 // set_status and set_label handler runs
	hooks    atomic.Int64 // add_note AfterCommit hooks run
	fail     atomic.Value // string: "" or a failMode: how add_note fails
	// hold, when set before the first call, is called by every add_note
	// run with its number (1 for the first), before it writes.
	hold func(run int64)
}

// The tools' arguments and outputs, in mwlib so that every library can
// name them.
type (
	noteIn   = mwlib.NoteIn
	noteOut  = mwlib.NoteOut
	statusIn = mwlib.StatusIn
	closeIn  = mwlib.CloseIn
	counter  = mwlib.Counter
)

// The ways add_note fails, set in mwFixture.fail.
const (
	failError        = "error"         // it returns an error
	failIsError      = "iserror"       // it returns an IsError result
	failIsErrorCoded = "iserror-coded" // it returns an IsError result with a code of its own
	failCoded        = "coded"         // it returns an *idem.Error
	failPanic        = "panic"         // it panics
)

// handlerCode is the code add_note gives its own errors.
const handlerCode = target.CodeEventBeforeStart

func noteKey(n int64) idem.Key { return idem.Key{Collection: "notes", ID: fmt.Sprintf("note-%d", n)} }

func newMWFixture(t *testing.T, h Harness) *mwFixture {
	t.Helper()
	f := &mwFixture{t: t, lib: h.library(), clock: NewClock(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC))}
	f.fail.Store("")
	f.store = h.New(t, f.clock.Now)
	f.srv = f.newServer()
	return f
}

// newServer returns another server over the same store, as a second process
// would be.
func (f *mwFixture) newServer() mwlib.Server { return f.lib.NewServer(f.t, f.config()) }

// serve returns a server of f's library with tools on f's store.
func (f *mwFixture) serve(tools ...mwlib.Tool) mwlib.Server {
	return f.lib.NewServer(f.t, mwlib.Config{Store: f.store, Options: idem.Options{Now: f.clock.Now}, Tools: tools})
}

// config is the fixture's server: its tools and get_operation.
func (f *mwFixture) config() mwlib.Config {
	opts := []idem.Option{idem.OpID()}
	keyed := []idem.Option{idem.RecordKeys("handle")}
	return mwlib.Config{Store: f.store, Options: idem.Options{Now: f.clock.Now, TTL: opTTL}, Status: true, Tools: []mwlib.Tool{
		{Name: "add_note", Description: "Add a note.", Handler: mwlib.Handler[noteIn, noteOut](f.addNote), Options: opts},
		{Name: "scoped_note", Description: "Add a note as a signed-in user.", Handler: mwlib.Handler[noteIn, noteOut](f.addNote),
			Options: opts},
		{Name: "set_status", Description: "Set a handle's status.", Handler: mwlib.Handler[statusIn, statusIn](f.setStatus), Options: keyed},
		// A label of 3 to 8 characters (code points, not bytes): a schema
		// with the keywords the middleware's fast argument check reads.
		{Name: "set_label", Description: "Set a handle's label.", Handler: mwlib.Handler[statusIn, statusIn](f.setStatus), Options: keyed,
			InputSchema: json.RawMessage(`{"type":"object",
		"properties":{"handle":{"type":"string"},"status":{"type":"string","minLength":3,"maxLength":8}},
		"required":["handle","status"],"additionalProperties":false}`)},
		{Name: "close_session", Description: "Close a session.", Handler: mwlib.Handler[closeIn, closeIn](closeSession),
			Options: []idem.Option{idem.OpID()}},
	}}
}

// addNote appends a note under a server-made id: unsafe to repeat without an
// op id.
func (f *mwFixture) addNote(ctx context.Context, tx idem.Tx, r mwlib.Request, in noteIn) (*mwlib.ErrorResult, noteOut, error) {
	n := f.execs.Add(1)
	if f.hold != nil {
		f.hold(n)
	}
	if err := tx.Create(ctx, noteKey(n), in); err != nil {
		return nil, noteOut{}, err
	}
	if !idem.AfterCommit(ctx, func(context.Context) { f.hooks.Add(1) }) {
		return nil, noteOut{}, errors.New("AfterCommit: no transaction in the handler's context")
	}
	switch f.fail.Load().(string) {
	case failError:
		return nil, noteOut{}, errors.New("handler failed")
	case failIsError:
		return &mwlib.ErrorResult{Text: "tool failed"}, noteOut{}, nil
	case failIsErrorCoded:
		return &mwlib.ErrorResult{Text: "tool failed with a code", Code: handlerCode}, noteOut{}, nil
	case failCoded:
		return nil, noteOut{}, &idem.Error{Code: handlerCode, Message: "handler refused"}
	case failPanic:
		panic("handler panicked")
	}
	return nil, noteOut{ID: noteKey(n).ID, N: n}, nil
}

func (f *mwFixture) setStatus(ctx context.Context, tx idem.Tx, r mwlib.Request, in statusIn) (*mwlib.ErrorResult, statusIn, error) {
	f.statuses.Add(1)
	return nil, in, tx.Put(ctx, idem.Key{Collection: "statuses", ID: in.Handle}, in)
}

func closeSession(ctx context.Context, tx idem.Tx, r mwlib.Request, in closeIn) (*mwlib.ErrorResult, closeIn, error) {
	id, err := r.Resolve(target.Query{
		ID:    in.SessionID,
		Owned: []idem.Candidate{{ID: "s-2", Label: "laptop"}, {ID: "s-1", Label: "phone"}},
	})
	if err != nil {
		return nil, closeIn{}, err
	}
	return nil, closeIn{SessionID: id}, tx.Put(ctx, idem.Key{Collection: "closed", ID: id}, in)
}

// connect returns a client session on a new connection to f's server.
func (f *mwFixture) connect() *mcp.ClientSession {
	f.t.Helper()
	return f.srv.Connect(f.t, "")
}

func connectTo(t *testing.T, srv *mcp.Server, wrap func(mcp.Transport) mcp.Transport) *mcp.ClientSession {
	t.Helper()
	cs, err := idemtest.Connect(context.Background(), srv, wrap)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

// callAll sends n calls of the tool at once, the i-th on sessions[i %
// len(sessions)], and returns their results. A call that fails is reported
// with t.Errorf and leaves its result nil.
func callAll(t *testing.T, sessions []*mcp.ClientSession, n int, name string, args map[string]any) []*mcp.CallToolResult {
	t.Helper()
	results := make([]*mcp.CallToolResult, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			res, err := sessions[i%len(sessions)].CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			results[i] = res
		})
	}
	wg.Wait()
	return results
}

// committedNotes counts the notes that exist among those the handler made.
func (f *mwFixture) committedNotes() int {
	f.t.Helper()
	n := 0
	for i := int64(1); i <= f.execs.Load(); i++ {
		err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
			_, err := tx.Get(ctx, noteKey(i), nil)
			return err
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, idem.ErrNotFound):
			f.t.Fatalf("reading note %d: %v", i, err)
		}
	}
	return n
}

// mustNotWrite fails the test if a note, or the op record of opID (when not
// empty), exists.
func (f *mwFixture) mustNotWrite(opID string) {
	f.t.Helper()
	err := f.store.Run(context.Background(), func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, noteKey(1), nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		f.t.Errorf("a refused call wrote %s: %v", noteKey(1), err)
	}
	if opID != "" && f.opRecord("", "add_note", opID) != nil {
		f.t.Errorf("a refused call stored the op record of %s", opID)
	}
}

func (f *mwFixture) opRecord(scope, tool, opID string) *oprecord.Record {
	f.t.Helper()
	rec, err := oprecord.Lookup(context.Background(), f.store, scope, tool, opID)
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("LookupOp: %v", err)
	}
	return rec
}

func errCode(res *mcp.CallToolResult) string {
	if res == nil || res.Meta == nil {
		return ""
	}
	s, _ := res.Meta[idem.MetaError].(string)
	return s
}

func replayed(res *mcp.CallToolResult) bool {
	if res == nil || res.Meta == nil {
		return false
	}
	b, _ := res.Meta[idem.MetaReplayed].(bool)
	return b
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// sameAnswer fails unless a and b carry the same content and structured
// content.
func sameAnswer(t *testing.T, a, b *mcp.CallToolResult) {
	t.Helper()
	if a.IsError || b.IsError {
		t.Fatalf("error results: %q / %q", resultText(a), resultText(b))
	}
	if err := idemtest.SameAnswer(a, b); err != nil {
		t.Error(err)
	}
}

func noteID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out noteOut
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		t.Fatalf("result has no note id: %s", b)
	}
	return out.ID
}

// heldTool is a server with one tool, slow, whose handler holds its first
// call until released, over f's store; a call with the same op id waits at
// most busyAfter for it.
type heldTool struct {
	cs      *mcp.ClientSession
	runs    atomic.Int64 // handler runs
	started chan struct{}
	release func() // lets the first call go; safe to call again
}

// callAnswer is what a call sent in the background got.
type callAnswer struct {
	res *mcp.CallToolResult
	err error
}

func newHeldTool(t *testing.T, f *mwFixture, busyAfter time.Duration) *heldTool {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	ht := &heldTool{started: make(chan struct{}), release: func() { once.Do(func() { close(release) }) }}
	t.Cleanup(ht.release) // never leave the handler stuck, whatever fails
	slow := func(ctx context.Context, tx idem.Tx, r mwlib.Request, in noteIn) (*mwlib.ErrorResult, noteOut, error) {
		if ht.runs.Add(1) == 1 {
			close(ht.started)
			<-release
		}
		return nil, noteOut{ID: "slow-1"}, tx.Put(ctx, idem.Key{Collection: "notes", ID: "slow-1"}, in)
	}
	srv := f.lib.NewServer(t, mwlib.Config{Store: f.store, Options: idem.Options{Now: f.clock.Now, BusyAfter: busyAfter},
		Tools: []mwlib.Tool{{Name: "slow", Handler: mwlib.Handler[noteIn, noteOut](slow), Options: []idem.Option{idem.OpID()}}}})
	ht.cs = srv.Connect(t, "")
	return ht
}

// send calls slow with args in the background.
func (ht *heldTool) send(args map[string]any) <-chan callAnswer {
	ch := make(chan callAnswer, 1)
	go func() {
		res, err := ht.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: args})
		ch <- callAnswer{res, err}
	}()
	return ch
}

// holdFirst sends args and returns once the handler holds the call, with
// the channel its answer will come on.
func (ht *heldTool) holdFirst(t *testing.T, args map[string]any) <-chan callAnswer {
	t.Helper()
	first := ht.send(args)
	select {
	case <-ht.started:
	case a := <-first:
		t.Fatalf("the first call ended before its handler ran: %v", a.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first call's handler did not start")
	}
	return first
}

// await returns the answer on ch, or releases the first call and fails the
// test with msg if none comes within 5 s.
func (ht *heldTool) await(t *testing.T, ch <-chan callAnswer, msg string) callAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		ht.release()
		t.Fatal(msg)
	}
	return callAnswer{}
}

// serveHTTP serves f's server over streamable HTTP behind bearer tokens,
// users mapping each token to the user id its caller gets, and returns a
// function that connects a client with a token.
func (f *mwFixture) serveHTTP(users map[string]string) func(token string) *mcp.ClientSession {
	t := f.t
	t.Helper()
	hs := httptest.NewServer(f.srv.HTTP(users))
	t.Cleanup(hs.Close)
	return func(token string) *mcp.ClientSession {
		t.Helper()
		hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		client := mcp.NewClient(&mcp.Implementation{Name: "storetest", Version: "v0"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect as %s: %v", token, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
