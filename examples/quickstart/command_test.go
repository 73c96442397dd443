package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	"github.com/idemkit/sdk/internal/testenv"
)

// The tests in this file run the command as a newcomer does: built with go
// build, started as a process of its own, and read from its output.

// quickstartBin is the command, built once per test run (TestMain removes it).
var quickstartBin = &testenv.Binary{Pkg: "."}

// quickstartBinary returns the command's path, building it on the first call.
func quickstartBinary(t *testing.T) string {
	t.Helper()
	return quickstartBin.Path(t)
}

// server is the command serving HTTP, started by startHTTP.
type server struct {
	cmd    *exec.Cmd
	url    string      // the endpoint URL it printed
	stderr chan string // the lines it printed after the first
	exited chan error  // receives cmd.Wait's answer
}

// urlLine is the first line the command logs over HTTP, in the log format
// every example shares (slog's text format, naming the server).
var urlLine = regexp.MustCompile(`^time=\S+ level=INFO msg="MCP over streamable HTTP" server=quickstart url=(http://\S+) users=0 `)

// startHTTP starts the command on a free port and reads the URL it prints.
func startHTTP(t *testing.T) *server {
	t.Helper()
	cmd := exec.Command(quickstartBinary(t), "-http", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "q.db"))
	cmd.Dir = t.TempDir()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: make(chan string, 16), exited: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				first <- sc.Text()
			} else {
				s.stderr <- sc.Text()
			}
		}
		close(first)
		close(s.stderr)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case line := <-first:
		m := urlLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("first line on stderr %q, want the endpoint URL", line)
		}
		s.url = m[1]
	case <-time.After(30 * time.Second):
		t.Fatal("no URL printed within 30 s")
	}
	return s
}

// stop sends sig and waits for the process to exit.
func (s *server) stop(t *testing.T, sig os.Signal, within time.Duration) error {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			return err
		}
	case <-time.After(within):
		t.Fatalf("still running %v after %v", within, sig)
		return nil
	}
	// A clean exit did not wait out the shutdown timeout: the command says
	// so when it has to close connections (a slow machine may take longer
	// than the timeout to exit, so time alone does not tell).
	for line := range s.stderr {
		if strings.Contains(line, "still running after") {
			return fmt.Errorf("the shutdown timed out: %s", line)
		}
	}
	return nil
}

// TestHTTPPrintsTheURLItServes starts the command on port 0 and checks that
// the URL it prints names the port it got and the /mcp path, that the URL
// answers an MCP initialize and a tool call, and that / says where MCP is.
func TestHTTPPrintsTheURLItServes(t *testing.T) {
	s := startHTTP(t)
	if !strings.HasSuffix(s.url, exserve.Path) || strings.Contains(s.url, ":0/") {
		t.Fatalf("printed URL %s: want the real port and the path %s", s.url, exserve.Path)
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url}, nil)
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

	resp, err := http.Get(strings.TrimSuffix(s.url, exserve.Path) + "/")
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
	if err := s.stop(t, syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM with a client connected: %v", err)
	}
}

// TestHTTPShutsDownOnSignals sends SIGTERM, then (to another process)
// SIGINT, and expects each to exit with status 0 within a few seconds.
func TestHTTPShutsDownOnSignals(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startHTTP(t)
			if err := s.stop(t, sig, 15*time.Second); err != nil {
				var lines []string
				for l := range s.stderr {
					lines = append(lines, l)
				}
				t.Fatalf("exit after %v: %v; stderr: %q", sig, err, lines)
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
	cmd := exec.Command(quickstartBinary(t), "-http", ln.Addr().String(), "-db", filepath.Join(t.TempDir(), "q.db"))
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); cmd.Process.Kill() }()
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Fatalf("exit %v, want a non-zero status; stderr: %q", err, stderr.String())
	}
	if out := stderr.String(); strings.Contains(out, "MCP over streamable HTTP") || !strings.Contains(out, "cannot serve on "+ln.Addr().String()) {
		t.Fatalf("stderr %q, want only the bind failure", out)
	}
}

// TestDemoRunsTheSameEachTime runs -demo twice in one folder: both runs print
// the same lines apart from the ids, and the folder stays empty (the demo
// uses a fresh temporary database).
func TestDemoRunsTheSameEachTime(t *testing.T) {
	dir := t.TempDir()
	ids := regexp.MustCompile(`demo-[A-Z2-7]{10}|exp-1-[A-Z2-7]{6}`)
	demo := func() string {
		t.Helper()
		cmd := exec.Command(quickstartBinary(t), "-demo")
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("-demo: %v; stderr: %q", err, stderr.String())
		}
		return ids.ReplaceAllStringFunc(string(out), func(id string) string { return id[:strings.LastIndexByte(id, '-')] + "-ID" })
	}
	first, second := demo(), demo()
	if first != second {
		t.Fatalf("two runs differ:\n%s\n---\n%s", first, second)
	}
	lines := strings.Split(strings.TrimSpace(first), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 6 steps and a summary:\n%s", len(lines), first)
	}
	for _, want := range []string{"no answer", "status committed", "io.idemkit/replayed=true", "expenses 1, total 1250 cents"} {
		if !strings.Contains(first, want) {
			t.Errorf("output lacks %q:\n%s", want, first)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the demo left %v in its folder", left)
	}
}

// TestHelpShowsExamples runs -h: it exits 0 and shows the example lines
// and the shared flags, the limits among them.
func TestHelpShowsExamples(t *testing.T) {
	cmd := exec.Command(quickstartBinary(t), "-h")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("-h: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"Examples:\n  quickstart -demo\n", "-store", "-db", "-user", "-max-calls", "docs/production.md"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestDemoWithTelemetry: -telemetry prints a span for each call and, at
// exit, the metrics, through the server's log on stderr; the demo's own
// output on stdout is unchanged.
func TestDemoWithTelemetry(t *testing.T) {
	cmd := exec.Command(quickstartBinary(t), "-demo", "-telemetry")
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("-demo -telemetry: %v; stderr: %q", err, stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{
		`msg=span server=quickstart name="tools/call add_expense"`, "attrs.idemkit.outcome=first", "attrs.idemkit.outcome=replay",
		"idemkit.calls", "mcp.server.operation.duration",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(string(out), "msg=span") {
		t.Errorf("spans went to stdout:\n%s", out)
	}
}
