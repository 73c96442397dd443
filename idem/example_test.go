package idem_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type Note struct {
	Text string `json:"text"`
}

type Added struct {
	ID string `json:"id"`
}

// A tool that appends under a server-made id is unsafe to repeat; with an op
// id minted by the client, the repeat gets the first answer and adds nothing.
func Example() {
	ctx := context.Background()
	store := memory.New(nil) // or the *Store of sqlite.Open(path, nil), postgres.New(pool, nil), ...
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)

	n := 0
	idem.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."}, store,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
			n++
			id := fmt.Sprintf("note-%d", n) // server-made: a second run would add a second note
			return nil, Added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.RequireOpID()) // every call carries an op id, so the tool is idempotent

	cs, _ := idemtest.Connect(ctx, srv, nil)
	args := map[string]any{"text": "buy milk", "op_id": "app-42"}
	for range 2 {
		res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: args})
		fmt.Println(res.StructuredContent, res.Meta[idem.MetaReplayed])
	}
	fmt.Println("handler runs:", n)
	// Output:
	// map[id:note-1] <nil>
	// map[id:note-1] true
	// handler runs: 1
}
