package idemtest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemtest"
)

type empty struct{}

// writeReadServer serves the tools write and read, which count their runs.
func writeReadServer() (*mcp.Server, *atomic.Int64) {
	runs := new(atomic.Int64)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	for _, name := range []string{"write", "read"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, in empty) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			return nil, nil, nil
		})
	}
	return srv, runs
}

// The Dropper loses exactly Count responses of the named tool, after the
// handler ran, and lets other tools and later calls through.
func TestDropperLosesOnlyWhatItIsTold(t *testing.T) {
	ctx := context.Background()
	srv, runs := writeReadServer()
	d := &idemtest.Dropper{Tool: "write", Count: 2}
	call := func(name string) error {
		cs, err := idemtest.Connect(ctx, srv, d.Wrap)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		return err
	}
	if err := call("read"); err != nil {
		t.Fatalf("another tool's response was dropped: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := call("write"); err == nil {
			t.Fatalf("write %d: response arrived, want it lost", i+1)
		}
	}
	if err := call("write"); err != nil {
		t.Fatalf("third write: %v; the budget of 2 was spent", err)
	}
	if d.Dropped() != 2 || runs.Load() != 4 {
		t.Errorf("dropped %d, handler runs %d; want 2 and 4 (every handler ran)", d.Dropped(), runs.Load())
	}
}
