// Command focus is a focus-session tracker MCP server whose write tools are
// safe to call twice, for two kinds of callers: a model, and a phone app
// that queues requests while offline.
//
//	go run ./examples/focus                         # stdio, on SQLite idemkit-focus.db in the current folder
//	go run ./examples/focus -demo                   # a scripted client: lost answers, retries, two devices
//	go run ./examples/focus -http 127.0.0.1:8080 -user TOKEN=alice -user TOKEN2=bob
//	go run -tags postgres ./examples/focus -store postgres://...   # PostgreSQL; -tags dynamodb, firestore or allstores for the others
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

	"github.com/idemkit/sdk/examples/internal/exserve"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	var f exserve.Flags
	c, status := f.Start(flagSet(&f, stderr), args, nil)
	if c == nil {
		return status
	}
	defer c.Close()

	var err error
	if f.Demo {
		err = runDemo(c.Ctx, c.Store, stdout)
	} else {
		err = c.Run(NewServer(c.Store, configOf(&f, c.Log)))
	}
	if errors.Is(err, context.Canceled) {
		err = nil // interrupted: a clean stop
	}
	return c.Exit(err)
}

// flagSet is the command's flag set: the flags every example takes.
func flagSet(f *exserve.Flags, stderr io.Writer) *flag.FlagSet {
	return f.FlagSet("focus", stderr, "sqlite:idemkit-focus.db",
		"focus -demo",
		"focus -http 127.0.0.1:8080 -user TOKEN=alice -user TOKEN2=bob",
		"focus -store postgres://localhost/focus   # stdio, on PostgreSQL: a build with -tags postgres")
}

// configOf is the server's Config as the flags set it.
func configOf(f *exserve.Flags, log *slog.Logger) Config {
	return Config{Log: log, TTL: f.TTL, MaxStoredBytes: f.MaxStoredBytes}
}
