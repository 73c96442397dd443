package main

import (
	"context"
	"io"
	"net/http/httptest"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// runDemo is the quickstart's -demo (exserve.QuickstartDemo) with mcp-go's
// own client, over streamable HTTP on loopback: an app whose first
// response is lost recovers it with get_operation and a retry, and each
// write happens once. It prints the quickstart's lines, word for word.
func runDemo(ctx context.Context, srv *server.MCPServer, s idem.Store, w io.Writer) error {
	d := &idemtest.HTTPDropper{Next: server.NewStreamableHTTPServer(srv, server.WithStateLess(true))}
	hs := httptest.NewServer(d) // on loopback, as -http serves it
	defer hs.Close()
	connect := func(ctx context.Context, lossy bool) (exserve.DemoClient, error) {
		if lossy {
			d.Arm("add_expense")
		}
		cl, err := connect(ctx, hs.URL+"/mcp")
		if err != nil {
			return nil, err
		}
		return demoClient{cl}, nil
	}
	return exserve.QuickstartDemo(ctx, w, s, connect, d.Dropped)
}

// demoClient is an mcp-go client as the demo calls it.
type demoClient struct{ *client.Client }

func (c demoClient) Call(ctx context.Context, tool string, args map[string]any) (any, map[string]any, error) {
	res, err := c.CallTool(ctx, callOf(tool, args))
	if err != nil {
		return nil, nil, err
	}
	var meta map[string]any
	if res.Meta != nil {
		meta = res.Meta.AdditionalFields
	}
	return res.StructuredContent, meta, nil
}

// callOf is a tools/call request of tool with args.
func callOf(tool string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return req
}

// connect starts and initializes an mcp-go client of the server at url.
func connect(ctx context.Context, url string) (*client.Client, error) {
	cl, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return nil, err
	}
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "quickstart-demo", Version: "v0"}
	if _, err := cl.Initialize(ctx, req); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}
