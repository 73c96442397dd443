package exserve

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// A Command is an example's command once its flags are parsed and its
// store is open, as [Flags.Start] returns it. Its Close releases what
// Start took.
type Command struct {
	// Ctx is done once SIGINT or SIGTERM arrives.
	Ctx context.Context
	// Stop releases the signals, so that a second one ends the process
	// at once.
	Stop func()
	// Log is the command's log, on the flag set's output (stderr).
	Log *slog.Logger
	// Store is the store of -store.
	Store idem.Store

	flags      *Flags
	closeStore func()
}

// Start starts the command fs names: it parses args with fs, which
// f.FlagSet returned (the example's own flags added to it), and calls
// check, when not nil, to refuse what those flags cannot take; then it
// opens the store, and, under -telemetry, the telemetry (see
// [Flags.OpenStore]). Without a Command it returns the exit status: 0
// for -h, 2 for flags that cannot work and 1 for a store that did not
// open, the last two logged.
func (f *Flags) Start(fs *flag.FlagSet, args []string, check func() error) (*Command, int) {
	log := Logger(fs.Output(), fs.Name())
	err := f.Parse(fs, args)
	if err == nil && check != nil {
		err = check()
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0
	} else if err != nil {
		log.Error(err.Error())
		return nil, 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	s, closeStore, err := f.OpenStore(ctx, log, fs.Name())
	if err != nil {
		log.Error("opening the store", "err", err)
		stop()
		return nil, 1
	}
	return &Command{Ctx: ctx, Stop: stop, Log: log, Store: s, flags: f, closeStore: closeStore}, 0
}

// Close closes the store and releases the signals.
func (c *Command) Close() {
	c.closeStore()
	c.Stop()
}

// Run serves the go-sdk server srv as the flags say, until c.Ctx is done;
// see [RunServer].
func (c *Command) Run(srv *mcp.Server) error {
	return Run(c.Ctx, c.Stop, c.Log, srv, c.flags)
}

// RunServer serves s, a server of any MCP library, as the flags say,
// until c.Ctx is done; see [RunServer].
func (c *Command) RunServer(s Server) error {
	return RunServer(c.Ctx, c.Stop, c.Log, s, c.flags)
}

// Exit logs that the command stopped, with err when it is not nil, and
// returns the exit status: 0 for a nil err, 1 otherwise.
func (c *Command) Exit(err error) int {
	if err != nil {
		c.Log.Error("stopped", "err", err)
		return 1
	}
	c.Log.Info("stopped")
	return 0
}
