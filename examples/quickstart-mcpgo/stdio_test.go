package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
)

// TestMain lets the test binary act as the command, so the stdio test can
// start it as a subprocess the way a local client does.
func TestMain(m *testing.M) {
	extest.Main(m, "QUICKSTART_MCPGO_AS_MAIN", run, bin, quickstartBin)
}

// TestStdioRepeatAcrossProcesses runs the command over stdio twice, as a
// client that restarts its server after a broken pipe would, and sends the
// same op id to each process: one expense.
func TestStdioRepeatAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "q.db")
	call := func() extest.Answer {
		t.Helper()
		cl, err := client.NewStdioMCPClient(os.Args[0], extest.AsMainEnv("QUICKSTART_MCPGO_AS_MAIN"), "-stdio", "-db", db)
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
			t.Fatalf("add_expense: %s", exserve.JSONOf(res, ""))
		}
		return answerOf(res)
	}
	first, second := call(), call()
	extest.SameReplayed(t, first, second)
	if got := second.Field("total_cents"); got != "700" {
		t.Fatalf("total %s, want 700", got)
	}
}
