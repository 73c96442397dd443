package idemtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idemtest"
)

// The HTTPDropper loses the answers to the calls it is armed for, after
// the handler ran, and lets other tools and later calls through.
func TestHTTPDropperLosesOnlyWhatItIsArmedFor(t *testing.T) {
	ctx := context.Background()
	srv, runs := writeReadServer()
	d := &idemtest.HTTPDropper{Next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})}
	hs := httptest.NewServer(d)
	defer hs.Close()
	call := func(name string) error {
		c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		return err
	}
	if err := call("write"); err != nil {
		t.Fatalf("an unarmed call lost its answer: %v", err)
	}
	d.Arm("write")
	d.Arm("write")
	if err := call("read"); err != nil {
		t.Fatalf("another tool's answer was lost: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := call("write"); err == nil {
			t.Fatalf("write %d: answer arrived, want it lost", i+2)
		}
	}
	if err := call("write"); err != nil {
		t.Fatalf("fourth write: %v; it was armed twice", err)
	}
	if d.Dropped() != 2 || runs.Load() != 5 {
		t.Errorf("dropped %d, handler runs %d; want 2 and 5 (every handler ran)", d.Dropped(), runs.Load())
	}
}
