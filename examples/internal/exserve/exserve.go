// Package exserve runs the example servers: the store they run on, stdio
// or streamable HTTP with bearer-token users, and a clean shutdown on
// SIGINT or SIGTERM.
package exserve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/internal/storeurl"
)

// Path is the URL path the MCP endpoint is served at.
const Path = "/mcp"

// ShutdownTimeout bounds how long a shutdown waits for calls in progress
// to be answered before it closes their connections.
const ShutdownTimeout = 5 * time.Second

// Flags are the command-line flags every example server shares.
type Flags struct {
	Store string // a storeurl value
	HTTP  string // serve streamable HTTP on this address; "" serves stdio
	Users Users  // bearer token -> user id; HTTP only
}

// Register adds the shared flags to fs; defaultStore is the store used
// when -store is not given.
func (f *Flags) Register(fs *flag.FlagSet, defaultStore string) {
	f.Users = Users{}
	fs.StringVar(&f.Store, "store", defaultStore, "the store: "+storeurl.Usage)
	fs.StringVar(&f.HTTP, "http", "", "serve streamable HTTP on this address at "+Path+" (127.0.0.1:0 picks a free port); default stdio")
	fs.Var(f.Users, "user", "with -http: accept bearer TOKEN for user ID, as TOKEN=ID (repeat for more users); each user's records are their own")
}

// Users maps bearer tokens to user ids; it is a flag.Value taking TOKEN=ID.
type Users map[string]string

func (u Users) String() string { return fmt.Sprintf("%d users", len(u)) }

// Set adds one TOKEN=ID. The error never repeats the token.
func (u Users) Set(v string) error {
	tok, id, ok := strings.Cut(v, "=")
	if !ok || tok == "" || id == "" {
		return errors.New("want TOKEN=ID")
	}
	u[tok] = id
	return nil
}

// Handler returns the streamable HTTP handler of srv at Path, stateless
// (every client we test works with its defaults, and the tools keep
// nothing in a session), behind the go-sdk's bearer-token check when users
// are given: a call's scope is then its user.
func Handler(srv *mcp.Server, users Users) http.Handler {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	if len(users) > 0 {
		verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			id, ok := users[token]
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: id, Expiration: time.Now().Add(24 * time.Hour)}, nil
		}
		h = auth.RequireBearerToken(verify, nil)(h)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: the MCP endpoint of this server is "+Path+" (streamable HTTP)", http.StatusNotFound)
	})
	return mux
}

// ServeHTTP serves h on ln until ctx is done, then shuts down: calls in
// progress are answered for up to ShutdownTimeout. stop releases the
// signal that ended ctx, so that a second one ends the process at once;
// logf says what the shutdown does.
func ServeHTTP(ctx context.Context, stop func(), logf func(format string, args ...any), h http.Handler, ln net.Listener) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
	logf("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		logf("calls still running after %v; closing their connections", ShutdownTimeout)
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

// Run serves srv as f says until ctx is done: over stdio, or over HTTP on
// f.HTTP, logging the URL once the port is bound.
func Run(ctx context.Context, stop func(), log *slog.Logger, srv *mcp.Server, f *Flags) error {
	if f.HTTP == "" {
		if len(f.Users) > 0 {
			return errors.New("-user needs -http: stdio has no bearer tokens")
		}
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil // interrupted: a clean shutdown
		}
		return err
	}
	ln, err := net.Listen("tcp", f.HTTP)
	if err != nil {
		return fmt.Errorf("cannot serve on %s: %w", f.HTTP, err)
	}
	defer ln.Close()
	log.Info("MCP over streamable HTTP", "url", EndpointURL(ln.Addr()), "users", len(f.Users))
	logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	return ServeHTTP(ctx, stop, logf, Handler(srv, f.Users), ln)
}
