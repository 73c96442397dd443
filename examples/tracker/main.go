// Command tracker is an MCP server over an issue tracker's REST API, as
// many public MCP servers are: a thin layer whose write tools each make
// one outbound call. The API takes no idempotency key (GitHub takes none),
// so a call sent twice makes two issues; idemkit's guard answers a repeat
// with the first answer instead.
//
//	go run ./examples/tracker -demo                      # lose answers, break the API, show what happened
//	go run ./examples/tracker -http 127.0.0.1:8080       # streamable HTTP at http://127.0.0.1:8080/mcp
//	TRACKER_TOKEN=... go run ./examples/tracker -api https://api.github.com -http 127.0.0.1:8080
//
// The tools are registered the ordinary go-sdk way (mcp.AddTool) and
// guarded in one line, srv.AddReceivingMiddleware(guard.Middleware(tools)),
// with the guard made once per process by idem.New: the pattern to copy.
// Over HTTP the server is stateless and builds a new mcp.Server for every
// request, as many servers do; what the guard needs lives in the store.
//
//   - create_issue is keyed by repo and title: a repeat with the same ones
//     within the TTL (-ttl, 24 hours) gets the first issue back. The call
//     forwards the guard's key as an Idempotency-Key header, for an API
//     that takes one.
//   - add_comment is keyed by repo, number and body: the same comment again
//     within the TTL gets the first answer, as its description says.
//   - list_issues reads, unguarded (readOnlyHint).
//   - get_operation looks up calls sent with an op id; these tools take
//     none, so the guard does not list it, and a caller asks by sending
//     the call again.
//
// An API failure is read as the handler's error says: a 4xx other than
// 408, 409 and 429, or a refused connection, means the API did not act
// (idem.NotDone: a repeat runs again); a timeout, a reset or a 5xx may
// come after it acted: an unknown outcome. So is a call whose process
// died, once its lease (-lease, 1 minute) has passed. A repeat of an
// unknown outcome is settled by the tool's reconcile function, which
// searches the tracker for an issue with the title (a comment with the
// body) made since the call was claimed: found, it is the answer; none
// found counts as not made only past the lease, and until then the repeat
// is answered unknown_outcome. The API client never lets net/http send a
// create again by itself, which it would for a request that carries an
// Idempotency-Key when a kept-alive connection breaks.
//
// Without -api the tracker is a fake in this process, on loopback; with
// -api the server calls that base URL (GitHub's paths) with the token in
// TRACKER_TOKEN as a bearer token. It takes the flags every example takes
// (docs/production.md); the store is SQLite idemkit-tracker.db in the current
// folder unless -store says otherwise, and -demo uses a fresh temporary
// one: it drives the server over HTTP on loopback and prints a line per
// step, with what the tracker received.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/otelidem"
)

// app is the server's state: made once per process and shared by the
// servers built for each request.
type app struct {
	api     *apiClient
	guard   *idem.Guard
	tools   idem.Tools
	lease   time.Duration    // the guard's lease, which findIssue waits out
	now     func() time.Time // the guard's clock
	schemas *mcp.SchemaCache
	built   atomic.Int64 // servers built
}

// config is what newApp needs.
type config struct {
	API   string // the tracker's base URL
	Token string // its bearer token
	TTL   time.Duration
	Lease time.Duration // 0: a minute
	Now   func() time.Time
	Log   *slog.Logger
	// MaxStoredBytes bounds the bytes of answers one user keeps at once
	// (0: no bound).
	MaxStoredBytes int64
}

// newApp makes the guard on store s and the API client of c.
func newApp(s idem.Store, c config) *app {
	if c.Lease == 0 {
		c.Lease = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	a := &app{api: newAPIClient(c.API, c.Token), lease: c.Lease, now: c.Now, schemas: mcp.NewSchemaCache()}
	a.guard = idem.New(s, &idem.Options{TTL: c.TTL, MaxStoredBytes: c.MaxStoredBytes, Lease: c.Lease, Logger: c.Log, Now: c.Now, Tracer: otelidem.NewTracer(nil)})
	a.tools = a.guardedTools()
	return a
}

// newServer builds the MCP server: the tools as the go-sdk registers them,
// and the guard in front of them.
func (a *app) newServer() *mcp.Server {
	a.built.Add(1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemkit-tracker", Version: "v0.1.0"}, &mcp.ServerOptions{SchemaCache: a.schemas})
	a.addTools(srv)
	srv.AddReceivingMiddleware(a.guard.Middleware(a.tools))
	return srv
}

// handler is the streamable HTTP handler: stateless, a new server for
// every request. exserve's limits read the body first and apply the
// go-sdk's limit on it.
func (a *app) handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.newServer() },
		&mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: -1})
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	var f exserve.Flags
	fs := f.FlagSet("tracker", stderr, "sqlite:idemkit-tracker.db",
		"tracker -demo",
		"tracker -http 127.0.0.1:8080",
		"TRACKER_TOKEN=... tracker -api https://api.github.com -http 127.0.0.1:8080 -user TOKEN=alice")
	var api string
	var apiErr error
	// The error is kept for after Parse: the flag package would print the
	// refused value, which may hold credentials.
	fs.Func("api", "the tracker's REST API base URL (GitHub's paths), called with the token in $TRACKER_TOKEN; default a fake in this process", func(v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			apiErr = errors.New("-api: want an http or https URL")
		}
		api = v
		return nil
	})
	lease := fs.Duration("lease", time.Minute, "how long a call may run: after it, a call whose process died without an answer is an unknown outcome, and reconcile may say it did not happen")
	c, status := f.Start(fs, args, func() error {
		switch {
		case apiErr != nil:
			return apiErr
		case *lease <= 0:
			return errors.New("-lease must be above zero")
		case f.Demo && api != "":
			return errors.New("-demo runs its own fake tracker: no -api")
		}
		return nil
	})
	if c == nil {
		return status
	}
	defer c.Close()

	if f.Demo {
		return c.Exit(runDemo(c.Ctx, c.Store, *lease, stdout, c.Log))
	}
	return c.Exit(serve(c, config{API: api, Token: os.Getenv("TRACKER_TOKEN"), TTL: f.TTL, MaxStoredBytes: f.MaxStoredBytes, Lease: *lease, Log: c.Log}))
}

// serve serves the server as the flags say, against c.API or, without
// it, a fake tracker in this process.
func serve(cmd *exserve.Command, c config) error {
	log := cmd.Log
	if c.API == "" {
		c.Token = rand.Text()
		fake := newFakeTracker(c.Token, time.Now)
		base, closeFake, err := fake.listen()
		if err != nil {
			return fmt.Errorf("starting the fake tracker: %w", err)
		}
		defer closeFake()
		c.API = base
		log.Info("tracker API: a fake in this process (-api URL for a real one)", "repos", fmt.Sprint(fakeRepos))
	} else if c.Token == "" {
		log.Warn("TRACKER_TOKEN is empty: calls to the tracker carry no token")
	}
	a := newApp(cmd.Store, c)
	return cmd.RunServer(exserve.Server{
		Stdio: func(ctx context.Context) error { return a.newServer().Run(ctx, &mcp.StdioTransport{}) },
		HTTP:  a.handler(),
	})
}
