package idemclient_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemclient"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/memory"
)

type Post struct {
	Text string `json:"text"`
}

type Posted struct {
	ID string `json:"id"`
}

// The first answer to a post is lost after the server committed. The tool
// accepts an op id but says idempotentHint: false, so the client does not
// send it again: it reports an unknown outcome, and get_operation settles
// it.
func Example() {
	ctx := context.Background()
	store := memory.New(nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "posts", Version: "v1"}, nil)
	runs := 0
	idem.AddTool(srv, &mcp.Tool{Name: "post", Description: "Publish a post."}, store,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Post) (*mcp.CallToolResult, Posted, error) {
			runs++
			id := fmt.Sprintf("post-%d", runs)
			return nil, Posted{ID: id}, tx.Create(ctx, idem.Key{Collection: "posts", ID: id}, in)
		}, idem.OpID())
	idem.RegisterStatusTool(srv, store)

	drop := &idemtest.Dropper{Tool: "post"} // loses the first answer
	connect := func(ctx context.Context) (*mcp.ClientSession, error) {
		return idemtest.Connect(ctx, srv, drop.Wrap)
	}
	c := idemclient.New(connect, &idemclient.Options{Trusted: true})
	defer c.Close()

	_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "post", Arguments: Post{Text: "hello"}})
	var u *idemclient.UnknownOutcomeError
	if errors.As(err, &u) {
		fmt.Println("unknown outcome; sent", u.Sends, "time; op id minted:", u.OpID != "")
		st, err := c.Reconcile(ctx, u.Tool, u.OpID)
		fmt.Println("reconciled:", st, err)
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// unknown outcome; sent 1 time; op id minted: true
	// reconciled: committed <nil>
	// handler runs: 1
}
