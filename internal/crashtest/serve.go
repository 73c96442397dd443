package crashtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/internal/storeurl"
)

// Serve is command crashserver: it parses args as its flags and serves until
// SIGINT or SIGTERM (or until it kills itself).
func Serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("crashserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("store", "", "the store: "+storeurl.Usage)
	addr := fs.String("http", "127.0.0.1:0", "serve on this address")
	fd := fs.Int("listen-fd", 0, "serve on this inherited listening socket instead of -http")
	kill := fs.String("kill", "", "POINT:CALL: kill the process with SIGKILL at POINT (start, written, committed) of the CALL-th handler run")
	unsafe := fs.Bool("unsafe", false, "register the tool without op ids (every retry appends again)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	plan, err := ParseKillPlan(*kill)
	if err != nil {
		return fmt.Errorf("-kill: %w", err)
	}
	if *spec == "" {
		return errors.New("-store is required")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, closeStore, err := storeurl.Open(ctx, *spec)
	if err != nil {
		return err
	}
	defer closeStore()

	srv := mcp.NewServer(&mcp.Implementation{Name: "crashserver", Version: "v1"}, nil)
	Register(srv, store, Options{Kill: plan, Unsafe: *unsafe})

	var ln net.Listener
	if *fd > 0 {
		f := os.NewFile(uintptr(*fd), "listener")
		ln, err = net.FileListener(f)
		f.Close()
	} else {
		ln, err = net.Listen("tcp", *addr)
	}
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "%shttp://%s/mcp\n", ReadyLine, ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// The test stops a server only when no call is in progress: close at
	// once, without waiting for the spare connections clients keep open.
	return hs.Close()
}
