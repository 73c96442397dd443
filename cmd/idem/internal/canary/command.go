package canary

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/sdk/internal/storeurl"
)

const usageText = `Usage: idem canary [flags]

Checks what an MCP client does when the answer to a tool call is lost after
the server committed it (a post-commit disconnect). It starts a canary MCP
server on this machine, runs every case of the matrix below against a client
policy, and prints one evidence record per case.

The canary's tools lose their first answer in each case, after committing:
  increment_then_drop   adds one to a durable counter; not safe to repeat
                        (idempotentHint: false)
  set_status_then_drop  sets an item's status by key (idempotentHint: true)
  lookup                reads the counter (readOnlyHint: true)
  get_operation         tells whether an op id committed

Each record says: the tool, whether the client trusts the server, the
annotations the server lists, how the answer was lost (a connection reset
before any byte, or a stream cut after the headers), how many times the tool
ran (server_invocations) and was sent again (replay_invocations), the state
in the store, what the client got, and a verdict:
  PASS  what the gates require: an unsafe, untrusted or unannotated call runs
        once and ends in an unknown outcome; a trusted idempotent or read-only
        call is sent again once and changes the store at most once
  FAIL  unsafe: a replay no gate allows, whatever it was answered (a tool
        error too), a result where no gate allows a replay, a second change,
        or an argument value in the error
  MISS  safe but needless: where every gate allows one replay, none, or one
        that does not end in the tool's result
The exit status is 0 when every case passes, 1 otherwise, 2 on a usage error.

Examples:
  idem canary                          the matrix with the safe-retry client (idemclient)
  idem canary -policy always           a naive client that always resends: FAILs
  idem canary -serve 127.0.0.1:8090    serve the canary only, to point an agent at it
  idem canary -url http://127.0.0.1:8090   run the matrix against that server

Flags:
`

// Main is the idem canary command: it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("idem canary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	policy := fs.String("policy", Policies[0].Name, "the client policy: safe (idemclient), always (resend after any error) or never")
	target := fs.String("url", "", "run against the canary served at this URL (by idem canary -serve) instead of starting one")
	serve := fs.String("serve", "", "serve the canary on this address (127.0.0.1:0 picks a port) until interrupted, and run no matrix")
	drop := fs.String("drop", string(DropReset), "with -serve: how the first answer of each tool is lost: reset, cut or none")
	replace := fs.Bool("replace", false, "with -serve: after the first lost answer, list the tools without annotations, as a replacement server")
	storeSpec := fs.String("store", "memory:", "the canary's store: "+storeurl.Usage)
	asJSON := fs.Bool("json", false, "print the records as JSON lines instead of text")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idem canary: unexpected argument %q; see idem canary -h\n", fs.Arg(0))
		return 2
	}
	p, err := PolicyNamed(*policy)
	if err != nil {
		fmt.Fprintf(stderr, "idem canary: -policy: %v\n", err)
		return 2
	}
	if *serve != "" && *target != "" {
		fmt.Fprintln(stderr, "idem canary: -serve and -url exclude each other")
		return 2
	}
	cfg := Config{Drop: Drop(*drop), Annotations: Declared}
	if *replace {
		cfg.Annotations = Replaced
	}
	if err := cfg.valid(); err != nil {
		fmt.Fprintf(stderr, "idem canary: -drop: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	base := ""
	if *target != "" {
		if base, err = baseURL(*target); err != nil {
			fmt.Fprintf(stderr, "idem canary: -url: %v\n", err)
			return 2
		}
	} else {
		addr := *serve
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(stderr, "idem canary: cannot serve on %s: %v\n", addr, err)
			return 1
		}
		s, release, err := storeurl.Open(ctx, *storeSpec)
		if err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "idem canary: -store: %v\n", err)
			return 1
		}
		defer release()
		srv, err := NewServer(s, cfg)
		if err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "idem canary: %v\n", err)
			return 2
		}
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
		base = "http://" + ln.Addr().String()
		if *serve != "" {
			fmt.Fprintf(stderr, "idem canary: MCP over streamable HTTP at %s/mcp (first answer of each tool: %s; annotations: %s)\n", base, cfg.Drop.Describe(), cfg.Annotations)
			fmt.Fprintf(stderr, "idem canary: what it saw at %s/stats/default; /mcp/NAME starts a fresh run NAME. Ctrl-C stops it.\n", base)
			<-ctx.Done()
			return 0
		}
	}

	if !*asJSON {
		fmt.Fprintf(stdout, "idem canary: policy %s: %s\n", p.Name, p.Description)
		fmt.Fprintf(stdout, "canary at %s; %d cases\n\n", base, len(Cases))
	}
	counts := map[string]int{}
	n := 0
	enc := json.NewEncoder(stdout)
	r := &Runner{Base: base, Policy: p}
	err = r.Run(ctx, Cases, func(rec Record) {
		n++
		counts[rec.Verdict]++
		if *asJSON {
			enc.Encode(rec)
			return
		}
		fmt.Fprintf(stdout, "case %d/%d: %s\n", n, len(Cases), rec.Case)
		printRecord(stdout, rec)
	})
	if err != nil {
		fmt.Fprintf(stderr, "idem canary: %v\n", err)
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d cases: %d PASS, %d FAIL, %d MISS\n", n, counts[Pass], counts[Fail], counts[Miss])
	}
	if counts[Pass] != n {
		return 1
	}
	return 0
}

// printRecord prints rec as the evidence record of the background note:
// one "field: value" line each.
func printRecord(w io.Writer, rec Record) {
	lines := [][2]string{
		{"tool", rec.Tool},
		{"server_trusted", fmt.Sprint(rec.ServerTrusted)},
		{"annotations", rec.Annotations},
		{"drop", rec.Drop},
		{"server_invocations", fmt.Sprint(rec.ServerInvocations)},
		{"replay_invocations", fmt.Sprint(rec.ReplayInvocations)},
		{"external_state", rec.ExternalState},
		{"client_result", rec.ClientResult},
	}
	if rec.Reconcile != "" {
		lines = append(lines, [2]string{"reconcile", rec.Reconcile})
	}
	verdict := rec.Verdict
	if rec.Why != "" {
		verdict += ": " + rec.Why
	}
	lines = append(lines, [2]string{"verdict", verdict})
	for _, l := range lines {
		fmt.Fprintf(w, "  %-19s %s\n", l[0]+":", l[1])
	}
	fmt.Fprintln(w)
}

// baseURL is the canary's root from a URL of it: its root, or its /mcp
// endpoint.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("want http://HOST:PORT (the root or the /mcp endpoint of an idem canary server)")
	}
	path := u.Path
	if i := strings.Index(path, "/mcp"); i >= 0 {
		path = path[:i]
	}
	return u.Scheme + "://" + u.Host + strings.TrimSuffix(path, "/"), nil
}
