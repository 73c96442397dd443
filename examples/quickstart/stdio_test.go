package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
)

// TestMain lets the test binary act as the quickstart command, so the stdio
// test can start it as a subprocess the way a local client does.
func TestMain(m *testing.M) {
	extest.Main(m, "QUICKSTART_AS_MAIN", run, quickstartBin)
}

// TestStdioRepeatAcrossProcesses runs the command over stdio twice, as a
// client that restarts its server after a broken pipe would, and sends the
// same op id to each process: one expense.
func TestStdioRepeatAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "q.db")
	call := func() extest.Answer {
		t.Helper()
		cmd := extest.AsMain("QUICKSTART_AS_MAIN", "-stdio", "-db", db)
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
		return answerOf(res)
	}
	first, second := call(), call()
	extest.SameReplayed(t, first, second)
	if got := second.Field("total_cents"); got != "700" {
		t.Fatalf("total %s, want 700", got)
	}
}
