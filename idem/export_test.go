package idem

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/internal/adapter"
	"github.com/idemkit/sdk/internal/oprecord"
)

// Names the black-box tests reach inside for.
const StatusToolName = statusToolName

var (
	HasOpID = func(req *mcp.CallToolRequest) bool {
		return req != nil && req.Params != nil && hasOpID(&adapter.Call{Arguments: req.Params.Arguments, Meta: req.Params.Meta})
	}
	ValidateOpID = func(id string) error {
		if err := validateOpID(id); err != nil {
			return err
		}
		return nil
	}
)

// DirectTool wraps h as AddTool does and returns its handler as a function
// the tests call directly, without a transport. The handler reads the call's
// arguments from req; in is not used, and the typed output is not returned
// (it is in the result's structured content).
func DirectTool[In, Out any](s Store, h HandlerFor[In, Out], opts ...Option) mcp.ToolHandlerFor[In, Out] {
	c, s := configFor(s, opts)
	return directTool(c, s, h)
}

func directTool[In, Out any](c *config, s Store, h HandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	t, err := sdkTool(&mcp.Tool{Name: "tool"}, c, s, h)
	if err != nil { // an In such as json.RawMessage: any object
		t, err = sdkTool(&mcp.Tool{Name: "tool", InputSchema: &jsonschema.Schema{Type: "object"}}, c, s, h)
	}
	if err != nil {
		panic(err)
	}
	return func(ctx context.Context, req *mcp.CallToolRequest, _ In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		res, err := handlerOf(t.serve)(ctx, req)
		return res, zero, err
	}
}

// StatusHandler returns the handler RegisterStatusTool registers.
func StatusHandler(s Store) mcp.ToolHandler {
	w, err := statusTool(s, decodeResult)
	if err != nil {
		panic(err)
	}
	return handlerOf(w.Call)
}

// LookupOp reads the live op record of (scope, tool, opID).
func LookupOp(ctx context.Context, s Store, scope, tool, opID string) (*oprecord.Record, error) {
	return oprecord.Lookup(ctx, s, scope, tool, opID)
}
