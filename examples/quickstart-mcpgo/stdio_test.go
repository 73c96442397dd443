package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestMain lets the test binary act as the command, so the stdio test can
// start it as a subprocess the way a local client does.
func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_MCPGO_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	bin.Remove()
	quickstartBin.Remove()
	os.Exit(code)
}

// TestStdioRepeatAcrossProcesses runs the command over stdio twice, as a
// client that restarts its server after a broken pipe would, and sends the
// same op id to each process: one expense.
func TestStdioRepeatAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "q.db")
	call := func() *mcp.CallToolResult {
		t.Helper()
		cl, err := client.NewStdioMCPClient(os.Args[0], append(os.Environ(), "QUICKSTART_MCPGO_AS_MAIN=1"), "-stdio", "-db", db)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := mcp.InitializeRequest{}
		req.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "v0"}
		if _, err := cl.Initialize(ctx, req); err != nil {
			t.Fatal(err)
		}
		res, err := cl.CallTool(ctx, callOf("add_expense", map[string]any{"amount_cents": 700, "op_id": "stdio-op"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("add_expense: %s", jsonOf(res, ""))
		}
		return res
	}
	first, second := call(), call()
	if replayed(first) || !replayed(second) {
		t.Fatalf("replay markers: %v, %v", replayed(first), replayed(second))
	}
	if a, b := jsonOf(first.StructuredContent, ""), jsonOf(second.StructuredContent, ""); a != b {
		t.Fatalf("answers differ: %s vs %s", a, b)
	}
	if got := jsonOf(second.StructuredContent, "total_cents"); got != "700" {
		t.Fatalf("total %s, want 700", got)
	}
}
