package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/internal/testenv"
)

// The tests in this file run the command as a newcomer does: built with go
// build, started as a process of its own, and read from its output.

// quickstartBin is the command, built once per test run (TestMain removes it).
var quickstartBin = &testenv.Binary{Pkg: "."}

// urlLine is the first line the command logs over HTTP, in the log format
// every example shares (slog's text format, naming the server).
var urlLine = regexp.MustCompile(`^time=\S+ level=INFO msg="MCP over streamable HTTP" server=quickstart url=(http://\S+) users=0 `)

// startHTTP starts the command on a free port and checks that the first
// line it logs is the URL it serves.
func startHTTP(t *testing.T) *extest.Process {
	t.Helper()
	cmd := exec.Command(quickstartBin.Path(t), "-http", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "q.db"))
	cmd.Dir = t.TempDir()
	p := extest.StartHTTP(t, cmd)
	line, _, _ := strings.Cut(p.Log(), "\n")
	if m := urlLine.FindStringSubmatch(line); m == nil || m[1] != p.URL {
		t.Fatalf("first line on stderr %q, want the endpoint URL", line)
	}
	return p
}

// TestHTTPPrintsTheURLItServes starts the command on port 0 and checks that
// the URL it prints names the port it got and the /mcp path, that the URL
// answers an MCP initialize and a tool call, and that / says where MCP is.
func TestHTTPPrintsTheURLItServes(t *testing.T) {
	s := startHTTP(t)
	if !strings.HasSuffix(s.URL, exserve.Path) || strings.Contains(s.URL, ":0/") {
		t.Fatalf("printed URL %s: want the real port and the path %s", s.URL, exserve.Path)
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL}, nil)
	if err != nil {
		t.Fatalf("initialize at the printed URL: %v", err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "idemkit-quickstart" {
		t.Fatalf("server name %q", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "set_budget", Arguments: map[string]any{"month": "2026-11", "amount_cents": 100}})
	if err != nil || res.IsError {
		t.Fatalf("set_budget: %v %v", err, res)
	}

	resp, err := http.Get(strings.TrimSuffix(s.URL, exserve.Path) + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), exserve.Path) {
		t.Fatalf("GET /: %d %q, want 404 naming %s", resp.StatusCode, body, exserve.Path)
	}

	// The client's session is still open: the
	// shutdown must not wait for it.
	if err := s.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM with a client connected: %v", err)
	}
}

// TestHTTPShutsDownOnSignals sends SIGTERM, then (to another process)
// SIGINT, and expects each to exit with status 0 within a few seconds.
func TestHTTPShutsDownOnSignals(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			if err := startHTTP(t).Stop(sig, 15*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHTTPBindFailure starts the command on a port already taken: it must
// say so and exit non-zero, without first saying it is serving.
func TestHTTPBindFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(quickstartBin.Path(t), "-http", ln.Addr().String(), "-db", filepath.Join(t.TempDir(), "q.db"))
	cmd.Dir = t.TempDir()
	code, _, stderr := extest.Run(t, cmd)
	if code <= 0 {
		t.Fatalf("exit %d, want a non-zero status; stderr: %q", code, stderr)
	}
	if strings.Contains(stderr, "MCP over streamable HTTP") || !strings.Contains(stderr, "cannot serve on "+ln.Addr().String()) {
		t.Fatalf("stderr %q, want only the bind failure", stderr)
	}
}

// TestDemoRunsTheSameEachTime runs -demo twice in one folder: both runs print
// the same lines apart from the ids, and the folder stays empty (the demo
// uses a fresh temporary database).
func TestDemoRunsTheSameEachTime(t *testing.T) {
	dir := t.TempDir()
	first, second := extest.QuickstartDemo(t, quickstartBin.Path(t), dir), extest.QuickstartDemo(t, quickstartBin.Path(t), dir)
	if first != second {
		t.Fatalf("two runs differ:\n%s\n---\n%s", first, second)
	}
	extest.EmptyDir(t, dir)
}

// TestHelpShowsExamples runs -h: it exits 0 and shows the example lines
// and the shared flags, the limits among them.
func TestHelpShowsExamples(t *testing.T) {
	code, _, stderr := extest.Run(t, exec.Command(quickstartBin.Path(t), "-h"))
	if code != 0 {
		t.Fatalf("-h: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"Examples:\n  quickstart -demo\n", "-store", "-db", "-user", "-max-calls", "docs/production.md"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr)
		}
	}
}

// TestDemoWithTelemetry: -telemetry prints a span for each call and, at
// exit, the metrics, through the server's log on stderr; the demo's own
// output on stdout is unchanged.
func TestDemoWithTelemetry(t *testing.T) {
	cmd := exec.Command(quickstartBin.Path(t), "-demo", "-telemetry")
	cmd.Dir = t.TempDir()
	code, out, log := extest.Run(t, cmd)
	if code != 0 {
		t.Fatalf("-demo -telemetry: exit %d; stderr: %q", code, log)
	}
	for _, want := range []string{
		`msg=span server=quickstart name="tools/call add_expense"`, "attrs.idemkit.outcome=first", "attrs.idemkit.outcome=replay",
		"idemkit.calls", "mcp.server.operation.duration",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(out, "msg=span") {
		t.Errorf("spans went to stdout:\n%s", out)
	}
}
