// Command focus is a focus-session tracker MCP server whose write tools are
// safe to call twice, for two kinds of callers: a model, and a phone app
// that queues requests while offline.
//
//	go run ./examples/focus                         # stdio, on SQLite idemkit-focus.db in the current folder
//	go run ./examples/focus -demo                   # a scripted client: lost answers, retries, two devices
//	go run ./examples/focus -http 127.0.0.1:8080 -user TOKEN=alice -user TOKEN2=bob
//	go run ./examples/focus -store postgres://...   # any store (see -help)
//
// Its tools, and what makes each safe to call twice:
//   - start_focus: create-if-absent on the device's running slot, so a device
//     runs at most one session; a client-minted session_id is honoured.
//   - end_focus: with an id, the stop merge rule (earliest end wins, one
//     stop kept per device, done beats other outcomes, a differing later
//     summary to the notes); without one, only the session running on the
//     caller's device, and never for a queued call (op_id or end_at):
//     otherwise refused with the candidates.
//   - delete_session: the same target rule; a tombstone, so a second delete
//     answers the same and deletes nothing.
//   - log_session: replace keyed by log_id; logged times cannot overlap.
//   - set_steps: replace keyed by (device, date), for a model.
//   - add_steps: an append that requires an op id minted by the app.
//   - heartbeat: create-if-absent keyed by (session_id, at).
//   - get_now, list_sessions: read only; get_operation for lost answers.
//
// Over HTTP each user (bearer token) has their own records and op ids.
// Logs go to stderr; SIGINT or SIGTERM ends it cleanly with status 0.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/internal/storeurl"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("server", "focus")
	fs := flag.NewFlagSet("focus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f exserve.Flags
	f.Register(fs, "sqlite:idemkit-focus.db")
	stdio := fs.Bool("stdio", false, "serve on stdin/stdout (the default without -http)")
	demo := fs.Bool("demo", false, "run a scripted client against the server in-process and print what each call did (on a fresh temporary database unless -store is given)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *stdio && f.HTTP != "" {
		log.Error("choose -stdio or -http, not both")
		return 2
	}
	storeGiven := false
	fs.Visit(func(fl *flag.Flag) { storeGiven = storeGiven || fl.Name == "store" })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *demo && !storeGiven {
		// The demo starts from an empty database each time, so what it
		// prints does not depend on an earlier run.
		dir, err := os.MkdirTemp("", "idemkit-focus-demo-")
		if err != nil {
			log.Error("demo", "err", err)
			return 1
		}
		defer os.RemoveAll(dir)
		f.Store = "sqlite:" + filepath.Join(dir, "focus.db")
	}
	s, closeStore, err := storeurl.Open(ctx, f.Store)
	if err != nil {
		log.Error("opening the store", "err", err)
		return 1
	}
	defer closeStore()

	if *demo {
		err = runDemo(ctx, s, stdout)
	} else {
		srv := NewServer(s, Config{Log: log})
		err = exserve.Run(ctx, stop, log, srv, &f)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
