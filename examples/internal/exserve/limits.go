package exserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bound what one request, one connection and one user can take of a
// server over HTTP, so that one user's flood does not stall another's
// calls. A zero field turns its limit off (MaxBody then falls back to the
// go-sdk's own limit of 4 MiB). docs/production.md says why each default is
// what it is.
type Limits struct {
	// MaxBody is the largest request body, in bytes; a larger one is
	// answered 413 and nothing in it runs.
	MaxBody int64
	// MaxBatch is the most JSON-RPC messages in one request. Batches are
	// part of protocol 2025-03-26 only (the go-sdk takes a request without
	// an MCP-Protocol-Version header as one); a larger batch is answered
	// 400 and nothing in it runs.
	MaxBatch int
	// MaxCallsPerUser is the most JSON-RPC messages of one user (bearer
	// token; all callers are one user without -user) being handled at
	// once, a batch counting its length. As many requests more wait for a
	// slot; beyond that a request is answered 429 with Retry-After and
	// does not run.
	MaxCallsPerUser int
	// ReadTimeout bounds the wait for a request's headers and body: a
	// client trickling them is answered 408 (or cut off). It does not cover
	// the call itself: net/http lifts the deadline once the body is read.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer: a call that takes longer, or a client that does not
	// read its answer, loses the answer (get_operation tells what became of
	// the call).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request.
	IdleTimeout time.Duration
}

// DefaultLimits are the limits the examples serve HTTP with unless flags
// say otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxBody:         1 << 20,
		MaxBatch:        8,
		MaxCallsPerUser: 16,
		ReadTimeout:     30 * time.Second,
		WriteTimeout:    2 * time.Minute,
		IdleTimeout:     time.Minute,
	}
}

// check refuses limits that cannot work.
func (l Limits) check() error {
	switch {
	case l.MaxBody < 0, l.MaxBatch < 0, l.MaxCallsPerUser < 0, l.ReadTimeout < 0, l.WriteTimeout < 0, l.IdleTimeout < 0:
		return errors.New("a limit cannot be negative (0 turns it off)")
	case l.MaxBatch > 0 && l.MaxCallsPerUser > 0 && l.MaxBatch > l.MaxCallsPerUser:
		return errors.New("-max-batch above -max-calls: such a batch could never run")
	}
	return nil
}

// Handler returns the streamable HTTP handler of srv at Path with
// DefaultLimits; see [Limits.Handler].
func Handler(srv *mcp.Server, users Users) http.Handler {
	return DefaultLimits().Handler(srv, users)
}

// Handler returns the streamable HTTP handler of srv at Path, stateless
// (every client we test works with its defaults, and the tools keep
// nothing in a session), behind a bearer-token check when users are given
// (a call's scope is then its user), with l's limits on bodies, batches
// and each user's calls.
func (l Limits) Handler(srv *mcp.Server, users Users) http.Handler {
	h, _ := l.handler(srv, users)
	return h
}

// handler is Handler, with the gate that counts each user's calls.
func (l Limits) handler(srv *mcp.Server, users Users) (http.Handler, *gate) {
	return l.endpoint(goSDKHandler(srv), users)
}

// goSDKHandler is the go-sdk's stateless streamable HTTP handler of srv.
func goSDKHandler(srv *mcp.Server) http.Handler {
	// bodies reads the body first, so it applies the go-sdk's limit too.
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: -1})
}

// Endpoint returns mcpHandler, the streamable HTTP handler of a server of
// any MCP library, at Path, behind a bearer-token check when users are
// given (the handler finds the caller's user with [User]), with l's limits
// on bodies, batches and each user's calls.
func (l Limits) Endpoint(mcpHandler http.Handler, users Users) http.Handler {
	h, _ := l.endpoint(mcpHandler, users)
	return h
}

// endpoint is Endpoint, with the gate that counts each user's calls.
func (l Limits) endpoint(h http.Handler, users Users) (http.Handler, *gate) {
	g := &gate{max: l.MaxCallsPerUser, users: map[string]*slots{}}
	h = l.bodies(g, h)
	if len(users) > 0 {
		h = users.require(h)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: the MCP endpoint of this server is "+Path+" (streamable HTTP)", http.StatusNotFound)
	})
	return mux, g
}

// bodies reads a POST's body before next sees it: at most MaxBody bytes
// (or the go-sdk's default) and at most MaxBatch messages, and passes it
// on once g has a slot for each message. The server's ReadTimeout bounds
// the read.
func (l Limits) bodies(g *gate, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		maxBody := l.MaxBody
		if maxBody == 0 {
			maxBody = mcp.DefaultMaxRequestBodyBytes
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooLarge *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooLarge):
			http.Error(w, fmt.Sprintf("413 request body larger than %d bytes (the server's -max-body)", maxBody), http.StatusRequestEntityTooLarge)
			return
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("408 request body not received within %v (the server's -read-timeout)", l.ReadTimeout), http.StatusRequestTimeout)
			return
		case err != nil:
			http.Error(w, "400 request body could not be read", http.StatusBadRequest)
			return
		}
		n, method := messages(b)
		if l.MaxBatch > 0 && n > l.MaxBatch {
			http.Error(w, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d in one request (the server's -max-batch); send them one per request", n, l.MaxBatch), http.StatusBadRequest)
			return
		}
		if l.MaxCallsPerUser > 0 && n > l.MaxCallsPerUser {
			// Never admitted by the per-user gate, so 429 would be retried in vain.
			http.Error(w, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d at once (the server's -max-calls); send fewer in one request", n, l.MaxCallsPerUser), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		if method == "subscriptions/listen" {
			// A subscriptions/listen stream (protocol 2026-07-28) stays
			// open for as long as the client's session: it holds none of
			// the user's call slots, and the write timeout, a bound on an
			// answer, does not cut it.
			http.NewResponseController(w).SetWriteDeadline(time.Time{})
			next.ServeHTTP(w, r)
			return
		}
		user := User(r.Context())
		if !g.acquire(r.Context(), user, n) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("429 too many calls of this user in progress: at most %d at once and as many waiting (the server's -max-calls); retry once one is answered", g.max), http.StatusTooManyRequests)
			return
		}
		defer g.release(user, n)
		next.ServeHTTP(w, r)
	})
}

// messages returns how many JSON-RPC messages body holds (the length of a
// batch, or 1 for anything else: the go-sdk answers what it cannot parse)
// and, for one message, its method. The body is decoded once.
func messages(body []byte) (n int, method string) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) > 0 && body[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(body, &batch) != nil {
			return 1, ""
		}
		return len(batch), ""
	}
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(body, &m) // a body that does not decode has no method
	return 1, m.Method
}

// gate lets each user have at most max messages being handled at once,
// and as many more waiting for a slot; 0 lets everything through. A
// refusal is an HTTP answer, before the go-sdk makes a session, so that a
// flood of them costs little. A request whose client goes away releases
// its slots when its handler returns: the go-sdk then cancels its calls.
type gate struct {
	max   int
	mu    sync.Mutex
	users map[string]*slots // guarded by mu; an entry lives while in use
}

// slots are one user's count; guarded by gate.mu.
type slots struct {
	running, waiting int
	freed            chan struct{} // closed, and replaced, when slots are released
}

// acquire takes n slots of user's, waiting while others hold them; it
// reports false, having taken none, when max more already wait (or ctx ends
// first).
func (g *gate) acquire(ctx context.Context, user string, n int) bool {
	if g.max == 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.users[user]
	if u == nil {
		u = &slots{freed: make(chan struct{})}
		g.users[user] = u
	}
	if u.running+n <= g.max {
		u.running += n
		return true
	}
	if u.waiting >= g.max || n > g.max {
		if u.running == 0 && u.waiting == 0 {
			delete(g.users, user)
		}
		return false
	}
	u.waiting++
	defer func() {
		if u.waiting--; u.running == 0 && u.waiting == 0 {
			delete(g.users, user)
		}
	}()
	for u.running+n > g.max {
		freed := u.freed
		g.mu.Unlock()
		select {
		case <-freed:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			return false
		}
	}
	u.running += n
	return true
}

// release gives back n slots of user's.
func (g *gate) release(user string, n int) {
	if g.max == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.users[user]
	u.running -= n
	close(u.freed)
	u.freed = make(chan struct{})
	if u.running == 0 && u.waiting == 0 {
		delete(g.users, user)
	}
}

// waiting returns how many of user's requests wait for a slot.
func (g *gate) waiting(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if u := g.users[user]; u != nil {
		return u.waiting
	}
	return 0
}
