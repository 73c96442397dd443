package idemtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type note struct {
	Text string `json:"text"`
}

type added struct {
	ID string `json:"id"`
}

// newServer has one tool that appends under a server-made id: safe with an
// op id, unsafe without one.
func newServer(runs *int) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
	idem.AddTool(srv, &mcp.Tool{Name: "add"}, memory.New(nil),
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in note) (*mcp.CallToolResult, added, error) {
			*runs++
			id := fmt.Sprintf("n-%d", *runs)
			return nil, added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.OpID())
	return srv
}

func TestHelpersTellSafeFromUnsafe(t *testing.T) {
	ctx := context.Background()
	runs := 0
	srv := newServer(&runs)
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	safe := &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "x", "op_id": "op-1"}}
	a, b, err := idemtest.SendTwice(ctx, cs, safe)
	if err != nil || idemtest.SameAnswer(a, b) != nil || runs != 1 {
		t.Fatalf("with an op id: err=%v same=%v runs=%d", err, idemtest.SameAnswer(a, b), runs)
	}
	retry, err := idemtest.DropAndRetry(ctx, srv, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "y", "op_id": "op-2"}})
	if err != nil || retry.IsError || runs != 2 {
		t.Fatalf("drop and retry with an op id: err=%v runs=%d", err, runs)
	}

	// Without an op id the tool appends twice, and SameAnswer says so.
	unsafe := &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"text": "z"}}
	a, b, err = idemtest.SendTwice(ctx, cs, unsafe)
	if err != nil {
		t.Fatal(err)
	}
	if idemtest.SameAnswer(a, b) == nil {
		t.Error("SameAnswer found no difference between two appends")
	}
	if idemtest.SameAnswer(a, nil) == nil {
		t.Error("SameAnswer accepted a nil result")
	}
}
