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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bound what one request, one connection and one user can take of a
// server over HTTP, so that one user's flood does not stall another's
// calls. A zero field turns its limit off (MaxBody then falls back to the
// go-sdk's own limit of 4 MiB). docs/serving.md says why each default is
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
	// MaxCallsPerUser is the most requests of one user (bearer token; all
	// callers are one user without -user) being handled at once; one more
	// is answered with JSON-RPC error CodeTooManyCalls and does not run.
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

// CodeTooManyCalls is the JSON-RPC error code of a request refused because
// its user has MaxCallsPerUser requests being handled: retry once one of
// them is answered. It is in the range JSON-RPC leaves to servers.
const CodeTooManyCalls = -32029

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
// and each user's calls. It adds the per-user limit to srv as a receiving
// middleware: call it once per server.
func (l Limits) Handler(srv *mcp.Server, users Users) http.Handler {
	if l.MaxCallsPerUser > 0 {
		srv.AddReceivingMiddleware(perUser(l.MaxCallsPerUser))
	}
	// bodies reads the body first, so it applies the go-sdk's limit too.
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: -1})
	h = l.bodies(h)
	if len(users) > 0 {
		h = users.require(h)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: the MCP endpoint of this server is "+Path+" (streamable HTTP)", http.StatusNotFound)
	})
	return mux
}

// bodies reads a POST's body before next sees it: at most MaxBody bytes
// (or the go-sdk's default) and at most MaxBatch messages. The server's
// ReadTimeout bounds the read.
func (l Limits) bodies(next http.Handler) http.Handler {
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
		if n := messages(b); l.MaxBatch > 0 && n > l.MaxBatch {
			http.Error(w, fmt.Sprintf("400 JSON-RPC batch of %d messages: at most %d in one request (the server's -max-batch); send them one per request", n, l.MaxBatch), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

// messages returns how many JSON-RPC messages body holds: the length of a
// batch, or 1 for anything else (the go-sdk answers what it cannot parse).
func messages(body []byte) int {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '[' {
		return 1
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		return 1
	}
	return len(batch)
}

// perUser is a receiving middleware that lets each user have at most max
// requests being handled at once. It counts in the server, not per HTTP
// request, so that a call whose client went away still counts until it
// ends.
func perUser(max int) mcp.Middleware {
	var mu sync.Mutex
	running := map[string]int{} // user -> requests being handled; guarded by mu
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			user := ""
			if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
				user = ex.TokenInfo.UserID
			}
			mu.Lock()
			if running[user] >= max {
				mu.Unlock()
				return nil, &jsonrpc.Error{Code: CodeTooManyCalls,
					Message: fmt.Sprintf("too many requests in progress for this user: at most %d at once (the server's -max-calls); retry when one is answered", max)}
			}
			running[user]++
			mu.Unlock()
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				if running[user]--; running[user] == 0 {
					delete(running, user)
				}
			}()
			return next(ctx, method, req)
		}
	}
}
