package exserve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/storeurl/storekind"
)

// Flags are the command-line flags every example server shares. An
// example adds its own to the flag set [Flags.FlagSet] returns, before
// [Flags.Parse].
type Flags struct {
	Store  string // a store value (internal/storeurl's grammar) of a kind this build links
	HTTP   string // serve streamable HTTP on this address; "" serves stdio
	Stdio  bool   // serve stdio (the default without -http)
	Demo   bool   // run the example's scripted client instead of serving
	Users  Users  // bearer token -> user id; HTTP only
	Limits Limits // HTTP only

	NoSweep   bool // no background sweep of expired op records
	Telemetry bool // print spans and metrics to the log

	// Retention: how long an answer is kept, how soon the store deletes
	// it once expired, and how many bytes of answers one user keeps.
	TTL            time.Duration // the Guard's TTL (idem.Options.TTL): an answer is kept and replayed this long
	SweepEvery     time.Duration // the longest wait between two rounds of the store's background sweep
	MaxStoredBytes int64         // the Guard's idem.Options.MaxStoredBytes: the bytes of answers one user keeps at once (0: no bound)

	defaultStore string
	storeGiven   bool
	userErr      error // a -user value that is not TOKEN=ID: returned by Parse
}

// FlagSet returns the flag set of the command name with the shared flags
// registered: defaultStore is the store used without -store, and examples
// are the lines -h shows above the flags. Errors and -h go to w.
func (f *Flags) FlagSet(name string, w io.Writer, defaultStore string, examples ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: %s [flags]\n\nExamples:\n", name)
		for _, e := range examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
		fmt.Fprintf(w, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nHow clients pass the bearer token, and what each limit guards: docs/production.md\n")
	}
	f.defaultStore = defaultStore
	f.Users = Users{}
	f.Limits = DefaultLimits()
	fs.StringVar(&f.Store, "store", defaultStore, storeUsage())
	fs.StringVar(&f.HTTP, "http", "", "serve streamable HTTP on this address at "+Path+" (127.0.0.1:0 picks a free port); default stdio")
	fs.BoolVar(&f.Stdio, "stdio", false, "serve on stdin/stdout (the default without -http)")
	fs.BoolVar(&f.Demo, "demo", false, "run a scripted client against the server in this process and print what each call did (on a fresh temporary store unless -store is given)")
	// Not fs.Var: the flag package would print a refused value, the token,
	// in its error.
	fs.Func("user", "with -http: accept bearer TOKEN for user ID, as TOKEN=ID (repeat for more users); each user's records are their own", func(v string) error {
		if err := f.Users.Set(v); err != nil && f.userErr == nil {
			f.userErr = fmt.Errorf("-user: %w", err)
		}
		return nil
	})
	fs.BoolVar(&f.NoSweep, "no-sweep", false, "do not sweep expired op records in the background (memory, SQLite, PostgreSQL), for a deployment where one separate process sweeps")
	fs.BoolVar(&f.Telemetry, "telemetry", false, "print every span and, each minute and at exit, the metrics idemkit records to the log (docs/production.md)")
	l := &f.Limits
	fs.Int64Var(&l.MaxBody, "max-body", l.MaxBody, "with -http: the largest request body in bytes (0: the go-sdk's 4 MiB)")
	fs.IntVar(&l.MaxBatch, "max-batch", l.MaxBatch, "with -http: the most JSON-RPC messages in one request (0: no limit)")
	fs.IntVar(&l.MaxCallsPerUser, "max-calls", l.MaxCallsPerUser, "with -http: the most calls of one user handled at once, as many requests more waiting (0: no limit)")
	fs.IntVar(&l.MaxCallsTotal, "max-calls-total", l.MaxCallsTotal, "with -http: the most calls of all users handled at once; a freed slot goes to the user who has waited longest (0: no limit)")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", l.ReadTimeout, "with -http: the wait for a request's headers, and then for its body (0: none)")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "with -http: the longest a request may take, from its headers to the end of its answer (0: none)")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "with -http: close a kept-alive connection idle this long (0: never)")
	f.retentionFlags(fs)
	return fs
}

// The defaults of -ttl, -sweep-every and -max-stored-bytes: the Guard's
// TTL, the stores' longest wait between two rounds of their background
// sweep, and the bytes of answers one user keeps at once (64 MiB).
const (
	defaultTTL            = 24 * time.Hour
	defaultSweepEvery     = time.Minute
	defaultMaxStoredBytes = 64 << 20
)

// retentionFlags registers -ttl, -sweep-every and -max-stored-bytes.
func (f *Flags) retentionFlags(fs *flag.FlagSet) {
	fs.DurationVar(&f.TTL, "ttl", defaultTTL, "how long a call's answer is kept and replayed to its repeats; a repeat after it runs again, and an identical call within it gets the first answer")
	fs.DurationVar(&f.SweepEvery, "sweep-every", defaultSweepEvery, "the longest wait between two rounds of the background sweep that deletes expired answers (memory, SQLite, PostgreSQL; sooner while it finds many)")
	fs.Int64Var(&f.MaxStoredBytes, "max-stored-bytes", defaultMaxStoredBytes, "the bytes of answers one user keeps at once, each counted until its -ttl ends; a call that would pass it is refused with quota_exceeded, saves nothing and is told when to retry, while replays are still answered (0: no bound)")
}

// checkRetention refuses a -ttl or -sweep-every that is not positive, and
// a negative -max-stored-bytes.
func (f *Flags) checkRetention() error {
	switch {
	case f.TTL <= 0:
		return errors.New("-ttl must be above zero: how long an answer is kept, such as 24h or 30m")
	case f.SweepEvery <= 0:
		return errors.New("-sweep-every must be above zero: the longest wait between two rounds of the sweep, such as 1m (-no-sweep turns the sweep off)")
	case f.MaxStoredBytes < 0:
		return errors.New("-max-stored-bytes must not be negative: the bytes of answers one user keeps at once (0: no bound)")
	}
	return nil
}

// Parse parses args and refuses combinations that cannot work, and a store
// this build does not link, before anything is opened. The error never
// repeats a flag's value.
func (f *Flags) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.userErr != nil {
		return f.userErr
	}
	fs.Visit(func(fl *flag.Flag) { f.storeGiven = f.storeGiven || fl.Name == "store" })
	f.storeGiven = f.storeGiven || f.Store != f.defaultStore // set through an example's own flag
	if fs.NArg() > 0 {
		return errors.New("unexpected arguments after the flags: every setting is a flag (see -h)")
	}
	switch {
	case f.Stdio && f.HTTP != "":
		return errors.New("-stdio and -http: choose one")
	case f.Demo && (f.Stdio || f.HTTP != ""):
		return errors.New("-demo runs its own client: no -stdio or -http")
	case len(f.Users) > 0 && f.HTTP == "":
		return errors.New("-user needs -http: stdio has no bearer tokens")
	}
	if err := checkLinked(fs.Name(), f.Store); err != nil {
		return err
	}
	if err := f.checkRetention(); err != nil {
		return err
	}
	return f.Limits.check()
}

// demoStore points f.Store at a fresh SQLite file in a temporary folder
// when -demo runs without -store, so that what a demo prints does not
// depend on an earlier run. The returned func removes the folder.
func (f *Flags) demoStore(name string) (func(), error) {
	if !f.Demo || f.storeGiven {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "idemkit-"+name+"-demo-")
	if err != nil {
		return nil, err
	}
	f.Store = "sqlite:" + filepath.Join(dir, name+".db")
	return func() { os.RemoveAll(dir) }, nil
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

// OpenStore opens the store of -store, its background sweep paced by
// -sweep-every (none under -no-sweep), or, for -demo without -store, a
// fresh SQLite file named after the server in a temporary folder, so that
// what a demo prints does not depend on an earlier run; and, under
// -telemetry, makes the process's spans and metrics print through log. The
// returned func releases all of it.
func (f *Flags) OpenStore(ctx context.Context, log *slog.Logger, name string) (idem.Store, func(), error) {
	removeDemo, err := f.demoStore(name)
	if err != nil {
		return nil, nil, fmt.Errorf("the demo's store: %w", err)
	}
	s, closeStore, err := storekind.Open(ctx, f.Store, storekind.Options{NoSweep: f.NoSweep, SweepEvery: f.SweepEvery})
	if err != nil {
		removeDemo()
		return nil, nil, err
	}
	stop := func(context.Context) error { return nil }
	if f.Telemetry {
		stop = Telemetry(log, 0)
	}
	return s, func() {
		closeStore()
		stop(context.Background())
		removeDemo()
	}, nil
}
