package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/testenv"
)

// The tests in this file run the command as a newcomer does: built with go
// build, started as a process of its own, and read from its output.

// bin is the command, and quickstartBin the go-sdk quickstart it mirrors,
// each built once per test run (TestMain removes them).
var (
	bin           = &testenv.Binary{Pkg: "."}
	quickstartBin = &testenv.Binary{Pkg: "../quickstart"}
)

// demoIDs are the ids a -demo run makes up.
var demoIDs = regexp.MustCompile(`demo-[A-Z2-7]{10}|exp-1-[A-Z2-7]{6}`)

// demo runs the command at path with -demo in dir and returns its output
// with the made-up ids replaced.
func demo(t *testing.T, path, dir string) string {
	t.Helper()
	cmd := exec.Command(path, "-demo")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -demo: %v; stderr: %q", filepath.Base(path), err, stderr.String())
	}
	return demoIDs.ReplaceAllStringFunc(string(out), func(id string) string { return id[:strings.LastIndexByte(id, '-')] + "-ID" })
}

// TestDemoIsTheQuickstarts runs -demo of this command and of the go-sdk
// quickstart: they print the same lines apart from the ids, and leave
// nothing in their folder (each uses a fresh temporary database).
func TestDemoIsTheQuickstarts(t *testing.T) {
	dir := t.TempDir()
	got, want := demo(t, bin.Path(t), dir), demo(t, quickstartBin.Path(t), dir)
	if got != want {
		t.Fatalf("the mcp-go demo printed:\n%s\nthe quickstart's:\n%s", got, want)
	}
	if again := demo(t, bin.Path(t), dir); again != got {
		t.Fatalf("two runs differ:\n%s\n---\n%s", got, again)
	}
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 7 {
		t.Fatalf("%d lines, want 6 steps and a summary:\n%s", len(lines), got)
	}
	for _, want := range []string{"no answer", "status committed", "io.idemkit/replayed=true", "expenses 1, total 1250 cents"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the demo left %v in its folder", left)
	}
}

// TestHelpShowsExamples runs -h: it exits 0 and shows the example lines
// and the shared flags.
func TestHelpShowsExamples(t *testing.T) {
	cmd := exec.Command(bin.Path(t), "-h")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("-h: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"Examples:\n  quickstart-mcpgo -demo\n", "-store", "-db", "-user", "-max-calls", "docs/production.md"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr.String())
		}
	}
}

// startHTTP starts the command on a free port with args and returns the
// endpoint URL it prints.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin.Path(t), append([]string{"-http", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "q.db")}, args...)...)
	cmd.Dir = t.TempDir()
	url := testenv.Start(t, cmd).URL(30 * time.Second)
	if !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("printed URL %q, want the endpoint at /mcp", url)
	}
	return url
}

// dial connects mcp-go's client to url with the bearer token tok ("" for none).
func dial(t *testing.T, url, tok string) *client.Client {
	t.Helper()
	ctx := t.Context()
	var opts []transport.StreamableHTTPCOption
	if tok != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	}
	cl, err := client.NewStreamableHttpClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "v0"}
	if _, err := cl.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestHTTPUsersScope serves two bearer users: each user's op ids are their
// own (the same op id from bob is a new expense, not alice's answer), and
// get_operation finds only the caller's own op. Without the scope from the
// token, such a call would be refused (scope_required), since mcp-go knows
// no user.
func TestHTTPUsersScope(t *testing.T) {
	url := startHTTP(t, "-user", "tok-a=alice", "-user", "tok-b=bob")
	alice, bob := dial(t, url, "tok-a"), dial(t, url, "tok-b")
	ctx := t.Context()
	add := func(cl *client.Client, cents int) *mcp.CallToolResult {
		t.Helper()
		res, err := cl.CallTool(ctx, callOf("add_expense", map[string]any{"amount_cents": cents, "op_id": "op-1"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("add_expense: %s", jsonOf(res, ""))
		}
		return res
	}
	a := add(alice, 500)
	b := add(bob, 700)
	if replayed(b) || jsonOf(b.StructuredContent, "total_cents") != "1200" {
		t.Fatalf("bob's op-1: %s, want a new expense (total 1200), not alice's answer", jsonOf(b, ""))
	}
	if again := add(alice, 500); !replayed(again) || jsonOf(again.StructuredContent, "") != jsonOf(a.StructuredContent, "") {
		t.Fatalf("alice's op-1 again: %s, want her first answer replayed", jsonOf(again, ""))
	}
	st, err := bob.CallTool(ctx, callOf("get_operation", map[string]any{"tool": "add_expense", "op_id": "op-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(st.StructuredContent, "output"); got != jsonOf(b.StructuredContent, "") {
		t.Fatalf("bob's get_operation: output %s, want his own answer %s", got, jsonOf(b.StructuredContent, ""))
	}

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without a token: %d, want 401", resp.StatusCode)
	}
}

// replayed reports whether res is marked as a replay.
func replayed(res *mcp.CallToolResult) bool {
	return res.Meta != nil && res.Meta.AdditionalFields[idem.MetaReplayed] == true
}

// TestHTTPShutsDownOnSIGTERM: a SIGTERM ends the command with status 0
// while a client is connected.
func TestHTTPShutsDownOnSIGTERM(t *testing.T) {
	cmd := exec.Command(bin.Path(t), "-http", "127.0.0.1:0", "-store", "memory:")
	p := testenv.Start(t, cmd)
	url := p.URL(30 * time.Second)
	if url == "" {
		t.Fatal("no URL printed")
	}
	cl := dial(t, url, "")
	if _, err := cl.CallTool(context.Background(), callOf("set_budget", map[string]any{"month": "2026-11", "amount_cents": 100})); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
}
