package idem

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Servers made and dropped (one per request, say) do not stay in the set of
// servers the refusal cleanup is installed on.
func TestCleanedServersForgetsCollectedServers(t *testing.T) {
	count := func() int {
		n := 0
		cleanedServers.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count()
	noop := func(ctx context.Context, tx Tx, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}
	for range 200 {
		srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
		AddTool(srv, &mcp.Tool{Name: "x"}, nil, noop)
		AddTool(srv, &mcp.Tool{Name: "y"}, nil, noop) // the same server: no second entry
	}
	if got := count() - before; got > 200 {
		t.Fatalf("%d entries for 200 servers", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count()-before > 10 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := count() - before; got > 10 {
		t.Errorf("%d of 200 dropped servers still recorded", got)
	}
}
