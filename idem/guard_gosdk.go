package idem

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// Middleware returns the go-sdk receiving middleware that guards the
// named tools of a server (see [Guard]), for [mcp.Server.AddReceivingMiddleware]:
//
//	srv.AddReceivingMiddleware(guard.Middleware(idem.Tools{"create_issue": {idem.RequireOpID()}}))
//
// It leaves the server's handlers and registration as they are, and
//
//   - rewrites tools/list: each guarded tool says idempotentHint: true
//     only where every repeat of the same arguments has no further effect
//     (record keys, or a required op id), gains op_id in its input schema
//     when it takes one, and a description that says which arguments are
//     keys and who mints op_id; get_operation is listed when a guarded
//     tool takes an op id;
//   - guards tools/call of a guarded tool: the op id and the record keys
//     are checked, then the arguments against the tool's input schema, with
//     the coded refusals of [AddTool]; a repeat of an operation that has an
//     answer gets it back, with _meta["io.idemkit/replayed"]; otherwise the
//     call claims the operation, the server's handler runs (without the
//     op_id argument, which the server's own schema does not know), and its
//     answer is stored;
//   - serves get_operation: committed (with the stored answer),
//     not_committed, in_progress or unknown, settling an unknown outcome
//     with the tool's [Reconcile] function first.
//
// A handler's result with IsError set, or an error, leaves the outcome
// unknown unless it wraps [ErrNotDone] (a result's error is read with
// GetError, so a typed handler's error counts too); a protocol error
// (*jsonrpc.Error, as for an unknown tool) or a request for input releases
// the claim. The first answer of an unknown outcome is the handler's own,
// with _meta["io.idemkit/error"] set to unknown_outcome and a sentence
// added that says so.
//
// The middleware looks a guarded tool's definition up with tools/list
// through the handlers after it, and keeps what it makes of each
// definition, so that a server built anew per request costs no more than
// one built once. Middleware panics if a tool's options hold a server-wide
// setting or a value they cannot use.
func (g *Guard) Middleware(tools Tools) mcp.Middleware {
	a := g.guard(tools, decodeResult)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				res, err := next(ctx, method, req)
				if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					return listed(ctx, a, lr), nil
				}
				return res, err
			case "tools/call":
				cr, ok := req.(*mcp.CallToolRequest)
				if !ok || cr.Params == nil {
					break
				}
				if cr.Params.Name == statusToolName {
					return resultOf(a.Lookup(ctx, callOf(cr))), nil
				}
				if a.Guards(cr.Params.Name) {
					return callGuarded(ctx, a, cr, next)
				}
			}
			return next(ctx, method, req)
		}
	}
}

// listed is lr with the guarded tools as they are published, and
// get_operation on the last page.
func listed(ctx context.Context, a *guarded, lr *mcp.ListToolsResult) *mcp.ListToolsResult {
	out := *lr
	out.Tools = make([]*mcp.Tool, 0, len(lr.Tools)+1)
	status := &mcp.Tool{Name: statusToolName, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}}
	status = published(status, a.Status())
	listedStatus := false
	for _, t := range lr.Tools {
		switch {
		case t == nil:
		case t.Name == statusToolName:
			t, listedStatus = status, true
		case a.Guards(t.Name):
			if gt := a.toolByID(ctx, t, func() adapter.ToolDef { return toolDef(t) }); gt != nil {
				t = published(t, gt.t.def)
			}
		}
		out.Tools = append(out.Tools, t)
	}
	if !listedStatus && lr.NextCursor == "" && a.ListsStatus() {
		out.Tools = append(out.Tools, status)
	}
	return &out
}

// callGuarded answers a call of a guarded tool.
func callGuarded(ctx context.Context, a *guarded, req *mcp.CallToolRequest, next mcp.MethodHandler) (mcp.Result, error) {
	t := findTool(ctx, req, next)
	if t == nil {
		return next(ctx, "tools/call", req) // the server answers: an unknown tool, say
	}
	run := func(ctx context.Context, args json.RawMessage) (adapter.Reply, error) {
		r := *req
		params := *req.Params
		params.Arguments = args
		r.Params = &params
		return replyOfCall(next(ctx, "tools/call", &r))
	}
	ans := a.call(ctx, a.toolByID(ctx, t, func() adapter.ToolDef { return toolDef(t) }), callOf(req), run)
	if !ans.Passed {
		return resultOf(ans), nil
	}
	if ans.Err != nil {
		return nil, ans.Err
	}
	res, _ := ans.Result.(*mcp.CallToolResult)
	if res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if len(ans.Meta) > 0 {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		maps.Copy(res.Meta, ans.Meta)
	}
	if ans.Text != "" {
		res.Content = append(res.Content, &mcp.TextContent{Text: ans.Text})
	}
	return res, nil
}

// findTool returns the server's definition of the tool req calls, as the
// handlers after the middleware list it; nil for none.
func findTool(ctx context.Context, req *mcp.CallToolRequest, next mcp.MethodHandler) *mcp.Tool {
	cursor := ""
	for range 1000 {
		res, err := next(ctx, "tools/list", &mcp.ListToolsRequest{Session: req.Session, Extra: req.Extra, Params: &mcp.ListToolsParams{Cursor: cursor}})
		lr, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok {
			return nil
		}
		for _, t := range lr.Tools {
			if t != nil && t.Name == req.Params.Name {
				return t
			}
		}
		if cursor = lr.NextCursor; cursor == "" {
			return nil
		}
	}
	return nil
}

// replyOfCall is how the server's handler answered a guarded call: a
// protocol error (*jsonrpc.Error, as for an unknown tool) did not happen,
// nor did an error or error result that wraps ErrNotDone.
func replyOfCall(res mcp.Result, err error) (adapter.Reply, error) {
	if err != nil {
		var we *jsonrpc.Error
		return adapter.Reply{NotDone: errors.As(err, &we) || errors.Is(err, ErrNotDone)}, err
	}
	r, _ := res.(*mcp.CallToolResult)
	if r == nil {
		r = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	reply := replyOf(r)
	reply.NotDone = r.IsError && errors.Is(r.GetError(), ErrNotDone)
	return reply, nil
}
