package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// TestMain lets the test binary act as the quickstart command, so the stdio
// test can start it as a subprocess the way a local client does.
func TestMain(m *testing.M) {
	if os.Getenv("QUICKSTART_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
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
		cmd := exec.Command(os.Args[0], "-stdio", "-db", db)
		cmd.Env = append(os.Environ(), "QUICKSTART_AS_MAIN=1")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_expense",
			Arguments: map[string]any{"amount_cents": 700, "op_id": "stdio-op"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first, second := call(), call()
	if first.Meta[idem.MetaReplayed] == true || second.Meta[idem.MetaReplayed] != true {
		t.Fatalf("replay markers: %v, %v", first.Meta[idem.MetaReplayed], second.Meta[idem.MetaReplayed])
	}
	if a, b := jsonOf(first.StructuredContent, ""), jsonOf(second.StructuredContent, ""); a != b {
		t.Fatalf("answers differ: %s vs %s", a, b)
	}
	if got := jsonOf(second.StructuredContent, "total_cents"); got != "700" {
		t.Fatalf("total %s, want 700", got)
	}
}
