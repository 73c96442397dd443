package main

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
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

// TestDemoIsTheQuickstarts runs -demo of this command and of the go-sdk
// quickstart: they print the same lines apart from the ids, and leave
// nothing in their folder (each uses a fresh temporary database).
func TestDemoIsTheQuickstarts(t *testing.T) {
	dir := t.TempDir()
	got, want := extest.QuickstartDemo(t, bin.Path(t), dir), extest.QuickstartDemo(t, quickstartBin.Path(t), dir)
	if got != want {
		t.Fatalf("the mcp-go demo printed:\n%s\nthe quickstart's:\n%s", got, want)
	}
	if again := extest.QuickstartDemo(t, bin.Path(t), dir); again != got {
		t.Fatalf("two runs differ:\n%s\n---\n%s", got, again)
	}
	extest.EmptyDir(t, dir)
}

// TestHelpShowsExamples runs -h: it exits 0 and shows the example lines
// and the shared flags.
func TestHelpShowsExamples(t *testing.T) {
	code, _, stderr := extest.Run(t, exec.Command(bin.Path(t), "-h"))
	if code != 0 {
		t.Fatalf("-h: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"Examples:\n  quickstart-mcpgo -demo\n", "-store", "-db", "-user", "-max-calls", "docs/production.md"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr)
		}
	}
}

// startHTTP starts the command on a free port with args and returns the
// endpoint URL it prints.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin.Path(t), append([]string{"-http", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "q.db")}, args...)...)
	cmd.Dir = t.TempDir()
	url := extest.StartHTTP(t, cmd).URL
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
			t.Fatalf("add_expense: %s", exserve.JSONOf(res, ""))
		}
		return res
	}
	a := add(alice, 500)
	b := add(bob, 700)
	if replayed(b) || exserve.JSONOf(b.StructuredContent, "total_cents") != "1200" {
		t.Fatalf("bob's op-1: %s, want a new expense (total 1200), not alice's answer", exserve.JSONOf(b, ""))
	}
	if again := add(alice, 500); !replayed(again) || exserve.JSONOf(again.StructuredContent, "") != exserve.JSONOf(a.StructuredContent, "") {
		t.Fatalf("alice's op-1 again: %s, want her first answer replayed", exserve.JSONOf(again, ""))
	}
	st, err := bob.CallTool(ctx, callOf("get_operation", map[string]any{"tool": "add_expense", "op_id": "op-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := exserve.JSONOf(st.StructuredContent, "output"); got != exserve.JSONOf(b.StructuredContent, "") {
		t.Fatalf("bob's get_operation: output %s, want his own answer %s", got, exserve.JSONOf(b.StructuredContent, ""))
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
func replayed(res *mcp.CallToolResult) bool { return answerOf(res).Replayed() }

// TestHTTPShutsDownOnSIGTERM: a SIGTERM ends the command with status 0
// while a client is connected.
func TestHTTPShutsDownOnSIGTERM(t *testing.T) {
	p := extest.StartHTTP(t, exec.Command(bin.Path(t), "-http", "127.0.0.1:0", "-store", "memory:"))
	cl := dial(t, p.URL, "")
	if _, err := cl.CallTool(context.Background(), callOf("set_budget", map[string]any{"month": "2026-11", "amount_cents": 100})); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}
