package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/internal/adapter"
)

// Options are the settings of an mcp-go server's Guard that are mcp-go's
// own; the others are idem's ([idem.Options]). A nil *Options means the
// defaults.
type Options struct {
	// Scope says who an operation belongs to (a user or tenant id): the
	// Guard's operations, its tools' and get_operation's are looked up
	// within a scope, so one caller never gets another's answer. mcp-go
	// has no authenticated user of its own; a server that authenticates
	// its callers puts the user in the context (server.WithHTTPContextFunc)
	// and returns it here. Its answer is the scope, "" included (refused
	// with scope_required under idem.Options.RequireScope).
	//
	// Without it, a call over HTTP that carries an Authorization header is
	// an authenticated caller without a user id, and is refused an op id
	// or record keys (scope_required): its operations could not be kept
	// apart from other callers'.
	Scope func(ctx context.Context, req mcp.CallToolRequest) string
}

// New returns the Guard of an mcp-go server, made once, as [idem.New] makes
// a go-sdk server's: its settings (opts, and mopts for mcp-go's scope) are
// those of every tool guarded with [Guard], registered with [AddTool] on it,
// and of get_operation. It panics where idem.New does, and if opts sets
// Scope, which reads a go-sdk request: set mopts.Scope.
func New(s idem.Store, opts *idem.Options, mopts *Options) *idem.Guard {
	if opts != nil && opts.Scope != nil {
		panic("mcpgo: New: idem.Options.Scope reads a go-sdk request; set mcpgo.Options.Scope")
	}
	var scope func(ctx context.Context, c *adapter.Call) string
	if mopts != nil && mopts.Scope != nil {
		f := mopts.Scope
		scope = func(ctx context.Context, c *adapter.Call) string {
			req, _ := c.Request.(mcp.CallToolRequest)
			return f(ctx, req)
		}
	}
	return adapter.NewGuard(s, opts, scope).(*idem.Guard)
}

// Guard returns the server option that protects the named tools of an
// mcp-go server with g, leaving their handlers and their registration as
// they are:
//
//	guard := mcpgo.New(store, &idem.Options{TTL: 24 * time.Hour}, nil) // once per process
//	srv := server.NewMCPServer("tracker", "v1",
//		mcpgo.Guard(guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))
//	srv.AddTool(mcp.NewTool("create_issue", ...), createIssue) // as before
//
// It adds a tool handler middleware that guards calls of the named tools
// as [idem.Guard.Middleware] does on the go-sdk, with the same checks,
// coded refusals, replays, claims and log records; a tool filter that
// lists them as published (idempotentHint, op_id in the input schema, the
// description); and the get_operation tool, which it serves whatever else
// the server registers under that name, and lists when a guarded tool
// takes an op id. The middleware's
// place is the option's: middleware given before it sees every call,
// replays and refusals included; middleware given after it runs only
// when the handler does. Applied to a server already made
// (mcpgo.Guard(...)(srv)), it comes after the server's middleware. A
// later srv.SetTools drops get_operation. Leave
// server.WithInputSchemaValidation off: the guard checks the arguments
// itself, and mcp-go's check, made first against the server's own
// schema, would refuse op_id where that schema forbids other properties.
//
// A handler's result with IsError set, or an error, leaves the outcome
// unknown, unless the error wraps [idem.ErrNotDone] ([idem.NotDone]) or
// the result is marked with [NotDone]; a URL elicitation the handler asks
// for (mcp.URLElicitationRequiredError), or a request for input, releases
// the claim too. The first answer of an unknown outcome is the handler's
// own, with _meta["io.idemkit/error"] set to unknown_outcome and a
// sentence that says so. A handler finds the key to forward upstream
// with [idem.IdempotencyKey], and gets its arguments without op_id.
//
// Everything a call needs is in the store and in g: one option, made once,
// serves every server built per request, and each call looks its tool up
// on the server it reached (a session's own tool first, as mcp-go does).
// Guard panics if g is nil, or where idem.Guard.Middleware does.
func Guard(g *idem.Guard, tools idem.Tools) server.ServerOption {
	if g == nil {
		panic("mcpgo: Guard needs an *idem.Guard (idem.New)")
	}
	gd := &guarded{a: adapter.Guard(g, tools, decodeResult)}
	st := gd.a.Status()
	gd.status = published(mcp.Tool{Name: st.Name, Annotations: mcp.ToolAnnotation{ReadOnlyHint: new(true), DestructiveHint: new(false), OpenWorldHint: new(false)}}, st)
	return func(s *server.MCPServer) {
		server.WithToolHandlerMiddleware(gd.middleware(s))(s)
		server.WithToolFilter(gd.list)(s)
		if gd.a.ListsStatus() { // some guarded tool takes an op id, which get_operation looks up
			s.AddTool(gd.status, gd.lookup)
		}
	}
}

// NotDone marks res, a handler's error result, as one whose effect
// certainly did not happen (the API refused the request, or it was never
// sent), as [idem.NotDone] marks an error: the guard releases the claim,
// and a repeat runs the handler again. It sets IsError, and marks res in
// its _meta, which the guard clears before the answer goes out. It
// returns a copy; NotDone(nil) is nil.
//
//	return mcpgo.NotDone(mcp.NewToolResultError("the tracker refused the issue")), nil
func NotDone(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	out := *res
	out.IsError = true
	out.Meta = withMeta(res.Meta, map[string]any{metaNotDone: true})
	return &out
}

// metaNotDone is the _meta member NotDone sets.
const metaNotDone = "io.idemkit/not_done"

// Reconcile sets how a guarded tool's unknown outcomes are settled, as
// [idem.Reconcile] does on the go-sdk: f is called, with no transaction
// open, inside a request of the caller that owns the operation (a repeat
// of the call, or get_operation), and returns the result the call would
// have answered when the effect happened, an error wrapping
// [idem.ErrNotDone] when it certainly did not, or anything else when it
// cannot tell.
func Reconcile(f func(ctx context.Context, req mcp.CallToolRequest, p idem.Pending) (*mcp.CallToolResult, error)) idem.Option {
	if f == nil {
		return adapter.Reconcile(nil).(idem.Option)
	}
	return adapter.Reconcile(func(ctx context.Context, c *adapter.Call, p any) (any, error) {
		req, _ := c.Request.(mcp.CallToolRequest)
		res, err := f(ctx, req, p.(idem.Pending))
		if res == nil {
			return nil, err // no result: not a typed nil in an interface
		}
		return res, err
	}).(idem.Option)
}

// guarded is what a Guard option adds to a server.
type guarded struct {
	a      adapter.Guarded
	status mcp.Tool // get_operation, as published
}

// middleware guards the calls of the guarded tools of s, and serves
// get_operation.
func (gd *guarded) middleware(s *server.MCPServer) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.Params.Name
			if name == gd.status.Name {
				return gd.lookup(ctx, req)
			}
			t, ok := toolNamed(ctx, s, name)
			if !gd.a.Guards(name) || !ok {
				return unmarked(next(ctx, req))
			}
			run := func(ctx context.Context, args json.RawMessage) (adapter.Reply, error) {
				return replyOfCall(next(ctx, withArguments(req, args)))
			}
			return answerOf(gd.a.Call(ctx, guardDef(t), callOf(ctx, req), run))
		}
	}
}

// list is the tool filter that lists the guarded tools as they are
// published, and get_operation as the guard serves it.
func (gd *guarded) list(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	out := make([]mcp.Tool, len(tools))
	for i, t := range tools {
		switch {
		case t.Name == gd.status.Name:
			t = gd.status
		case gd.a.Guards(t.Name):
			if def, ok := gd.a.Publish(ctx, guardDef(t)); ok {
				t = published(t, def)
			}
		}
		out[i] = t
	}
	return out
}

// lookup answers a call of get_operation.
func (gd *guarded) lookup(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return resultOf(gd.a.Lookup(ctx, callOf(ctx, req))), nil
}

// toolNamed returns the tool a call of name reaches on s: the session's
// own, or the server's, as mcp-go looks it up.
func toolNamed(ctx context.Context, s *server.MCPServer, name string) (mcp.Tool, bool) {
	if ss, ok := server.ClientSessionFromContext(ctx).(server.SessionWithTools); ok {
		if st, ok := ss.GetSessionTools()[name]; ok {
			return st.Tool, true
		}
	}
	if st := s.GetTool(name); st != nil {
		return st.Tool, true
	}
	return mcp.Tool{}, false
}

// guardDef is t as the server lists it. Unlike [AddTool], which infers
// the schema of a tool without properties from its input type, the guard
// checks calls against the schema as it is.
func guardDef(t mcp.Tool) adapter.ToolDef {
	def := toolDef(t)
	if def.InputSchema == nil {
		def.InputSchema = map[string]any{"type": "object"}
	}
	return def
}

// withArguments is req with args as its arguments, as mcp-go decodes them.
func withArguments(req mcp.CallToolRequest, args json.RawMessage) mcp.CallToolRequest {
	req.Params.RawArguments, req.Params.Arguments = args, nil
	if len(args) > 0 {
		var v any
		if json.Unmarshal(args, &v) == nil {
			req.Params.Arguments = v
		}
	}
	return req
}

// replyOfCall is how the server's handler answered a guarded call. It
// certainly did not happen after an error that wraps ErrNotDone or asks
// for a URL elicitation, or an error result marked with NotDone.
func replyOfCall(res *mcp.CallToolResult, err error) (adapter.Reply, error) {
	if err != nil {
		return adapter.Reply{NotDone: errors.Is(err, idem.ErrNotDone) || errors.Is(err, mcp.URLElicitationRequiredError{})}, err
	}
	if res == nil {
		res = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	res, notDone := unmark(res)
	reply := replyOf(res)
	reply.NotDone = res.IsError && notDone
	return reply, nil
}

// answerOf is the guard's answer as mcp-go's handler result.
func answerOf(a adapter.Answer) (*mcp.CallToolResult, error) {
	if !a.Passed {
		return resultOf(a), nil
	}
	if a.Err != nil {
		return nil, a.Err
	}
	res := mcp.CallToolResult{Content: []mcp.Content{}}
	if r, ok := a.Result.(*mcp.CallToolResult); ok && r != nil {
		res = *r
	}
	if len(a.Meta) > 0 {
		res.Meta = withMeta(res.Meta, a.Meta)
	}
	if a.Text != "" {
		res.Content = append(slices.Clip(res.Content), mcp.NewTextContent(a.Text))
	}
	return &res, nil
}

// unmarked passes a handler's answer on without NotDone's mark.
func unmarked(res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if res != nil {
		res, _ = unmark(res)
	}
	return res, err
}

// unmark returns res without NotDone's mark (a copy, when it has it), and
// whether it had it.
func unmark(res *mcp.CallToolResult) (*mcp.CallToolResult, bool) {
	if res.Meta == nil || res.Meta.AdditionalFields[metaNotDone] != true {
		return res, false
	}
	out := *res
	m := *res.Meta
	m.AdditionalFields = maps.Clone(m.AdditionalFields)
	delete(m.AdditionalFields, metaNotDone)
	out.Meta = &m
	if len(m.AdditionalFields) == 0 && m.ProgressToken == nil {
		out.Meta = nil
	}
	return &out, true
}

// withMeta returns a copy of m with add's members set.
func withMeta(m *mcp.Meta, add map[string]any) *mcp.Meta {
	out := &mcp.Meta{}
	if m != nil {
		*out = *m
	}
	out.AdditionalFields = maps.Clone(out.AdditionalFields)
	if out.AdditionalFields == nil {
		out.AdditionalFields = make(map[string]any, len(add))
	}
	maps.Copy(out.AdditionalFields, add)
	return out
}
