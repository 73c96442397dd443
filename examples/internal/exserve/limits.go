package exserve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bound what one request, one connection, one user and all users
// can take of a server over HTTP, so that one user's flood does not stall
// another's calls. A zero field turns its limit off (MaxBody then falls
// back to the go-sdk's own limit of 4 MiB). docs/production.md says why
// each default is what it is.
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
	// once, a batch counting its length and a large body one call for each
	// 64 KiB (a body of 1 MiB counts 16). As many requests more wait for a
	// slot; beyond that a request is answered 429 with Retry-After and
	// does not run.
	MaxCallsPerUser int
	// MaxCallsTotal is the most JSON-RPC messages of all users being
	// handled at once. When a slot frees, the next turn goes to the
	// waiting user whose last turn is the oldest, so that one user's queue
	// never sits in front of another user's call.
	MaxCallsTotal int
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
		MaxCallsTotal:   32,
		ReadTimeout:     30 * time.Second,
		WriteTimeout:    2 * time.Minute,
		IdleTimeout:     time.Minute,
	}
}

// check refuses limits that cannot work.
func (l Limits) check() error {
	switch {
	case l.MaxBody < 0, l.MaxBatch < 0, l.MaxCallsPerUser < 0, l.MaxCallsTotal < 0, l.ReadTimeout < 0, l.WriteTimeout < 0, l.IdleTimeout < 0:
		return errors.New("a limit cannot be negative (0 turns it off)")
	case l.MaxBatch > 0 && l.MaxCallsPerUser > 0 && l.MaxBatch > l.MaxCallsPerUser:
		return errors.New("-max-batch above -max-calls: such a batch could never run")
	case l.MaxBatch > 0 && l.MaxCallsTotal > 0 && l.MaxBatch > l.MaxCallsTotal:
		return errors.New("-max-batch above -max-calls-total: such a batch could never run")
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
// and calls. Refusals are logged on slog's default logger and counted on
// the global meter provider; see [Limits.Endpoint].
func (l Limits) Handler(srv *mcp.Server, users Users) http.Handler {
	h, _ := l.endpoint(goSDKHandler(srv), users, newRefusals(slog.Default(), nil, RefusalLogInterval))
	return h
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
// on bodies, batches and calls. A message whose method, or a name in its
// params, is longer than 128 bytes is refused, and the errors the server
// answers are cut so that they cannot carry the request's bytes. Each
// refusal is answered after [RefusalPause], counted on the counter
// idemkit.http.refusals of the global meter provider, by
// http.response.status_code and idemkit.reason, and logged on slog's
// default logger at most once every [RefusalLogInterval] for each reason
// and user ([RunServer] logs on its own logger).
func (l Limits) Endpoint(mcpHandler http.Handler, users Users) http.Handler {
	h, _ := l.endpoint(mcpHandler, users, newRefusals(slog.Default(), nil, RefusalLogInterval))
	return h
}

// endpoint is Endpoint, refusing through rf, with the gate that counts the
// calls.
func (l Limits) endpoint(h http.Handler, users Users, rf *refusals) (http.Handler, *gate) {
	g := newGate(l.MaxCallsPerUser, l.MaxCallsTotal)
	h = l.bodies(g, rf, h)
	if len(users) > 0 {
		h = users.require(h, rf)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: the MCP endpoint of this server is "+Path+" (streamable HTTP)", http.StatusNotFound)
	})
	return mux, g
}

// bodies reads a POST's body before next sees it: at most MaxBody bytes
// (or the go-sdk's default) and at most MaxBatch messages, none with a
// method or a name in its params longer than maxNameLen, and passes it on
// once g has a slot for each message, with the errors of next's answer
// elided. The server's ReadTimeout bounds the read. Each refusal goes to
// rf.
func (l Limits) bodies(g *gate, rf *refusals, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		user := User(r.Context())
		refuse := func(status int, reason, text string) {
			rf.refuse(r.Context(), user, status, reason)
			http.Error(w, text, status)
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
			refuse(http.StatusRequestEntityTooLarge, reasonBodyTooLarge, fmt.Sprintf("413 request body larger than %d bytes (the server's -max-body)", maxBody))
			return
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			refuse(http.StatusRequestTimeout, reasonTimeout, fmt.Sprintf("408 request body not received within %v (the server's -read-timeout)", l.ReadTimeout))
			return
		case err != nil:
			refuse(http.StatusBadRequest, reasonBodyUnread, "400 request body could not be read")
			return
		}
		in := inspect(b)
		if l.MaxBatch > 0 && in.n > l.MaxBatch {
			refuse(http.StatusBadRequest, reasonBatchTooLarge, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d in one request (the server's -max-batch); send them one per request", in.n, l.MaxBatch))
			return
		}
		// Never admitted by the gate, so 429 would be retried in vain.
		if l.MaxCallsPerUser > 0 && in.n > l.MaxCallsPerUser {
			refuse(http.StatusBadRequest, reasonBatchTooLarge, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d at once (the server's -max-calls); send fewer in one request", in.n, l.MaxCallsPerUser))
			return
		}
		if l.MaxCallsTotal > 0 && in.n > l.MaxCallsTotal {
			refuse(http.StatusBadRequest, reasonBatchTooLarge, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d at once (the server's -max-calls-total); send fewer in one request", in.n, l.MaxCallsTotal))
			return
		}
		switch in.refuse {
		case reasonMethodTooLong:
			rf.refuse(r.Context(), user, http.StatusBadRequest, in.refuse)
			refuseMessage(w, in.id, -32601, fmt.Sprintf("method not found: a method name is longer than %d bytes", maxNameLen))
			return
		case reasonNameTooLong:
			rf.refuse(r.Context(), user, http.StatusBadRequest, in.refuse)
			refuseMessage(w, in.id, -32602, fmt.Sprintf("invalid params: a name is longer than %d bytes", maxNameLen))
			return
		}
		q := &quoteless{w: w}
		defer q.finish()
		if in.method == "subscriptions/listen" {
			// A subscriptions/listen stream (protocol 2026-07-28) stays
			// open for as long as the client's session: it holds none of
			// the call slots, and the write timeout, a bound on an
			// answer, does not cut it.
			http.NewResponseController(w).SetWriteDeadline(time.Time{})
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(q, r)
			return
		}
		slots := l.slots(in.n, len(b))
		if !g.acquire(r.Context(), user, slots) {
			if r.Context().Err() != nil {
				return // the client has gone: no one to answer
			}
			w.Header().Set("Retry-After", "1")
			refuse(http.StatusTooManyRequests, reasonTooManyCalls, fmt.Sprintf("429 too many requests of this user: at most %d wait for a slot (the server's -max-calls); retry once one is answered", g.maxWaiting()))
			return
		}
		defer g.release(user, slots)
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(q, r)
	})
}

// bodySlot is the size of body that counts as one call: a request takes a
// slot for each of its messages, or for each bodySlot bytes of its body if
// that is more, so that one user's megabyte arguments run one or two at a
// time, not as many as small calls.
const bodySlot = 64 << 10

// slots returns how many slots a request of n messages and a body of size
// bytes takes: never more than the limits hold.
func (l Limits) slots(n, size int) int {
	s := max(n, size/bodySlot)
	if l.MaxCallsPerUser > 0 {
		s = min(s, l.MaxCallsPerUser)
	}
	if l.MaxCallsTotal > 0 {
		s = min(s, l.MaxCallsTotal)
	}
	return s
}
