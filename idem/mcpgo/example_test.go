package mcpgo_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/mcpgo"
	"github.com/idemkit/sdk/store/memory"
)

// An mcp-go server protects the tool it has with one added option: its
// handler and its registration stay as they were. A repeat of the same
// op id is answered from the first call, and the handler runs once.
func ExampleGuard() {
	guard := idem.New(memory.New(nil), nil) // once per process
	srv := server.NewMCPServer("tracker", "v1",
		mcpgo.Guard(guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))

	created := 0
	srv.AddTool(mcp.NewTool("create_issue", mcp.WithString("title", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			created++ // a call to an API that creates the issue
			return mcp.NewToolResultText(fmt.Sprintf("created issue %d", created)), nil
		})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		panic(err)
	}
	for range 2 {
		req := mcp.CallToolRequest{}
		req.Params.Name = "create_issue"
		req.Params.Arguments = map[string]any{"title": "crash on start", "op_id": "op-1"}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Content[0].(mcp.TextContent).Text, "replayed:", res.Meta != nil && res.Meta.AdditionalFields[idem.MetaReplayed] == true)
	}
	fmt.Println("created:", created)
	// Output:
	// created issue 1 replayed: false
	// created issue 1 replayed: true
	// created: 1
}
