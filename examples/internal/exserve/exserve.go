// Package exserve runs the example servers: their shared flags and
// command line ([Flags.Start]), their log format, the store they run on,
// stdio or streamable HTTP with bearer-token users and limits that keep
// one user's flood from stalling another's calls, and a clean shutdown on
// SIGINT or SIGTERM; and what their tools and demos share ([InputSchema],
// [QuickstartDemo]). Only [Run], [Command.Run], [Handler],
// [Limits.Handler] and [CallUser] take the go-sdk's types; the rest
// serves a server of any MCP library ([RunServer], [Limits.Endpoint]).
package exserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is the URL path the MCP endpoint is served at.
const Path = "/mcp"

// ShutdownTimeout bounds how long a shutdown waits for calls in progress
// to be answered before it closes their connections.
const ShutdownTimeout = 5 * time.Second

// Logger returns the log every example writes: slog's text format on w
// (stderr), each record naming the server.
func Logger(w io.Writer, server string) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil)).With("server", server)
}

// User returns the user whose bearer token the request of ctx carried (an
// HTTP request's context, behind the check of [Limits.Endpoint]), or ""
// without -user. A server on another MCP library reads it there to scope
// its calls.
func User(ctx context.Context) string {
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		return ti.UserID
	}
	return ""
}

// CallUser returns the user whose bearer token carried the call req (the
// authenticated user, by whom idem's default scope keeps op ids apart), or
// "" without one: over stdio, or over HTTP without -user.
func CallUser(req *mcp.CallToolRequest) string {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return ""
}

// require answers 401 to a request without a bearer token of u, with the
// WWW-Authenticate challenge RFC 6750 asks for, telling rf, and hands the
// others to next with their user in the context, where the go-sdk reads it
// (and [User]).
func (u Users) require(next http.Handler, rf *refusals) http.Handler {
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := u[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	checked := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The go-sdk's check sends no challenge unless it is given an
		// OAuth metadata URL, which these servers have none of.
		fields := strings.Fields(r.Header.Get("Authorization"))
		switch {
		case len(fields) != 2 || !strings.EqualFold(fields[0], "bearer"):
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			rf.refuse(r.Context(), "", http.StatusUnauthorized, reasonUnauthorized)
		case u[fields[1]] == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp", error="invalid_token"`)
			rf.refuse(r.Context(), "", http.StatusUnauthorized, reasonUnauthorized)
		}
		checked.ServeHTTP(w, r)
	})
}

// Serve serves h on ln with l's timeouts until ctx is done, then shuts
// down: calls in progress are answered for up to ShutdownTimeout. stop
// releases the signal that ended ctx, so that a second one ends the
// process at once.
func (l Limits) Serve(ctx context.Context, stop func(), log *slog.Logger, h http.Handler, ln net.Listener) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if l.IdleTimeout == 0 {
		hs.IdleTimeout = -1 // net/http would use ReadHeaderTimeout
	}
	// Shutdown waits up to 5 s for a connection that has not sent its
	// first request (net/http counts it as idle only after that), and a
	// client's HTTP transport keeps such spare connections: close them at
	// shutdown, so that only calls in progress are waited for.
	var mu sync.Mutex
	fresh := map[net.Conn]bool{}
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if st == http.StateNew {
			fresh[c] = true
		} else {
			delete(fresh, c)
		}
	}
	hs.RegisterOnShutdown(func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range fresh {
			c.Close()
		}
	})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn(fmt.Sprintf("calls still running after %v; closing their connections", ShutdownTimeout))
		hs.Close()
	}
	return nil
}

// EndpointURL is the URL a client on this machine reaches the MCP endpoint
// at, with the port the listener got.
func EndpointURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + Path
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost" // listening on every address
	}
	return "http://" + net.JoinHostPort(host, port) + Path
}

// A Server is an MCP server of any MCP library, as [RunServer] runs it.
type Server struct {
	// Stdio serves stdin and stdout until ctx is done or the client
	// closes stdin.
	Stdio func(ctx context.Context) error
	// HTTP is its streamable HTTP handler, stateless; RunServer puts it
	// behind the users and limits at Path.
	HTTP http.Handler
}

// Run serves the go-sdk server srv as f says; see [RunServer].
func Run(ctx context.Context, stop func(), log *slog.Logger, srv *mcp.Server, f *Flags) error {
	return RunServer(ctx, stop, log, Server{
		Stdio: func(ctx context.Context) error { return srv.Run(ctx, &mcp.StdioTransport{}) },
		HTTP:  goSDKHandler(srv),
	}, f)
}

// RunServer serves s as f says until ctx is done: over stdio, or over HTTP
// on f.HTTP with f's users and limits, logging the URL once the port is
// bound.
func RunServer(ctx context.Context, stop func(), log *slog.Logger, s Server, f *Flags) error {
	if f.HTTP == "" {
		if len(f.Users) > 0 {
			return errors.New("-user needs -http: stdio has no bearer tokens")
		}
		log.Info("MCP over stdio (-http ADDR serves streamable HTTP)")
		err := s.Stdio(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: a clean shutdown
		}
		return err
	}
	ln, err := net.Listen("tcp", f.HTTP)
	if err != nil {
		return fmt.Errorf("cannot serve on %s: %w (choose another address with -http)", f.HTTP, err)
	}
	defer ln.Close()
	l := f.Limits
	log.Info("MCP over streamable HTTP", "url", EndpointURL(ln.Addr()), "users", len(f.Users),
		"max_body", l.MaxBody, "max_batch", l.MaxBatch, "max_calls", l.MaxCallsPerUser, "max_calls_total", l.MaxCallsTotal,
		"read_timeout", l.ReadTimeout, "write_timeout", l.WriteTimeout, "idle_timeout", l.IdleTimeout)
	h, _ := l.endpoint(s.HTTP, f.Users, newRefusals(log, nil, RefusalLogInterval))
	return l.Serve(ctx, stop, log, h, ln)
}
