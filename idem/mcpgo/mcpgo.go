// Package mcpgo makes the tool handlers of a mark3labs/mcp-go server safe to
// call twice. A server protects the tools it already has with one server
// option, [Guard], which leaves their handlers and their registration as
// they are; its settings come from an [idem.Guard], made once per process
// by [New]:
//
//	guard := mcpgo.New(store, nil, &mcpgo.Options{Scope: userOf}) // who the callers are
//	srv := server.NewMCPServer("tracker", "v1",
//		mcpgo.Guard(guard, idem.Tools{"create_issue": {idem.RequireOpID()}}))
//	srv.AddTool(mcp.NewTool("create_issue", ...), createIssue) // as before
//
// A guarded tool's effect lies outside the store (a REST API, say): its
// call is claimed before the handler runs and its answer is stored after.
// For a tool whose effect is a write to the store, [AddTool] is idem's
// transactional middleware for mcp-go: a tool registered with it gets
// everything [idem.AddTool] gives a go-sdk tool (a typed handler over an
// [idem.Tx], the op id as the op_id argument or in _meta, record keys,
// honest annotations, coded refusals that quote no argument,
// get_operation) with the same wire output:
//
//	srv := server.NewMCPServer("notes", "v1")
//	mcpgo.AddTool(srv, mcp.NewTool("add_note", mcp.WithDescription("Add a note.")), guard, // or a store
//		func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
//			id := newID() // server-made: a second run would add a second note
//			return nil, Added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
//		}, idem.RequireOpID())
//	mcpgo.RegisterStatusTool(srv, guard) // get_operation, for unknown outcomes
//
// The options are idem's, but for the scope: mcp-go has no authenticated
// user of its own, so a server that authenticates its callers says who
// they are once, in [Options.Scope] given to New.
// Without it, a call over HTTP that carries an Authorization header is
// taken as an authenticated caller without a user id, and is refused an op
// id (scope_required): its operations could not be kept apart from other
// callers'.
//
// This package is a module of its own, so that mcp-go stays out of the
// module graph of servers on the go-sdk. docs/protect.md compares the two.
package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/internal/adapter"
)

// HandlerFor is a typed tool handler that writes through tx, as
// [idem.HandlerFor] is for the go-sdk, with the same rules: it has no
// effect outside tx; an error, or a result with IsError set, rolls its
// writes back and stores nothing.
type HandlerFor[In, Out any] func(ctx context.Context, tx idem.Tx, req mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// AddTool registers h on srv as tool t, wrapped as [idem.AddTool] wraps a
// go-sdk handler, and with the same published metadata. t's InputSchema
// (or RawInputSchema) is the author's, or empty to infer it from In; its
// OutputSchema likewise, from Out. AddTool panics where idem.AddTool does.
func AddTool[In, Out any](srv *server.MCPServer, t mcp.Tool, s idem.Store, h HandlerFor[In, Out], opts ...idem.Option) {
	st := Tool(t, s, h, opts...)
	srv.AddTool(st.Tool, st.Handler)
}

// Tool returns what [AddTool] registers, for servers that register tools
// their own way (srv.AddTools). The pair must be registered together: the
// handler checks calls against the returned tool's input schema.
func Tool[In, Out any](t mcp.Tool, s idem.Store, h HandlerFor[In, Out], opts ...idem.Option) server.ServerTool {
	w, err := adapter.Wrap(toolDef(t), s, adapter.For(func(ctx context.Context, tx idem.Tx, c *adapter.Call, in In) (adapter.Reply, Out, error) {
		res, out, err := h(ctx, tx, c.Request.(mcp.CallToolRequest), in)
		return replyOf(res), out, err
	}), decodeResult, opts)
	if err != nil {
		panic(err.Error())
	}
	return server.ServerTool{Tool: published(t, w.Def), Handler: handlerOf(w)}
}

// RegisterStatusTool adds the read-only get_operation(tool, op_id) tool to
// srv, with the same hints, as [idem.RegisterStatusTool] adds it to a
// go-sdk server. s is the server's Guard (from [New]), whose scope it
// takes, as the tools registered on it do; or a store, with the defaults.
func RegisterStatusTool(srv *server.MCPServer, s idem.Store) {
	w, err := adapter.WrapStatus(s, decodeResult)
	if err != nil {
		panic(err.Error())
	}
	t := mcp.Tool{Name: w.Def.Name, Annotations: mcp.ToolAnnotation{ReadOnlyHint: new(true), DestructiveHint: new(false), OpenWorldHint: new(false)}}
	srv.AddTool(published(t, w.Def), handlerOf(w))
}

// Queued reports whether req carries an op id, as the op_id argument or in
// _meta, well formed or not: such a call is queued or replayed. It is
// [github.com/idemkit/sdk/idem/target.Query]'s Queued for an mcp-go request.
func Queued(req mcp.CallToolRequest) bool { return adapter.HasOpID(callOf(context.Background(), req)) }

// toolDef is t as the middleware reads it.
func toolDef(t mcp.Tool) adapter.ToolDef {
	def := adapter.ToolDef{Name: t.Name, Description: t.Description}
	// mcp.NewTool gives every tool an input schema of type object with no
	// properties: that one is inferred from In, as a go-sdk tool's nil
	// schema is.
	switch in := t.InputSchema; {
	case t.RawInputSchema != nil:
		def.InputSchema = t.RawInputSchema
	case in.Type != "" && (in.Type != "object" || len(in.Properties) > 0 || len(in.Required) > 0 || len(in.Defs) > 0 || in.AdditionalProperties != nil):
		def.InputSchema = in
	}
	switch {
	case t.RawOutputSchema != nil:
		def.OutputSchema = t.RawOutputSchema
	case t.OutputSchema.Type != "":
		def.OutputSchema = t.OutputSchema
	}
	a := t.Annotations
	def.ReadOnly = a.ReadOnlyHint != nil && *a.ReadOnlyHint
	def.Idempotent = a.IdempotentHint != nil && *a.IdempotentHint
	// mcp.NewTool sets destructiveHint true for every tool, read-only ones
	// included, and the spec reads it only for a tool that is not
	// read-only: here it cannot be a claim that contradicts readOnlyHint.
	def.Destructive = !def.ReadOnly && a.DestructiveHint != nil && *a.DestructiveHint
	if t.Meta != nil {
		def.Meta = t.Meta.AdditionalFields
	}
	return def
}

// published is t as def, the published definition, says.
func published(t mcp.Tool, def adapter.ToolDef) mcp.Tool {
	t.Description = def.Description
	t.Annotations.IdempotentHint = new(def.Idempotent)
	t.InputSchema, t.OutputSchema = mcp.ToolInputSchema{}, mcp.ToolOutputSchema{}
	t.RawInputSchema, _ = json.Marshal(def.InputSchema)
	t.RawOutputSchema = nil
	if def.OutputSchema != nil {
		t.RawOutputSchema, _ = json.Marshal(def.OutputSchema)
	}
	if len(def.Meta) > 0 {
		m := &mcp.Meta{}
		if t.Meta != nil {
			*m = *t.Meta
		}
		m.AdditionalFields = def.Meta
		t.Meta = m
	}
	return t
}

// handlerOf is w's mcp-go tool handler. It answers every call with a
// result, never a protocol error.
func handlerOf(w *adapter.Wrapped) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return resultOf(w.Call(ctx, callOf(ctx, req))), nil
	}
}

// callOf is req as the middleware reads it.
func callOf(ctx context.Context, req mcp.CallToolRequest) *adapter.Call {
	c := &adapter.Call{Tool: req.Params.Name, Arguments: req.Params.RawArguments, Request: req}
	if c.Arguments == nil && req.Params.Arguments != nil {
		// A request made in process, not decoded from the wire.
		c.Arguments, _ = json.Marshal(req.Params.Arguments)
	}
	if m := req.Params.Meta; m != nil {
		c.Meta = m.AdditionalFields
	}
	c.Authenticated = req.Header.Get("Authorization") != ""
	// mcp-go gives a call that came with no HTTP request an empty header.
	c.Transport = "pipe"
	if len(req.Header) > 0 {
		c.Header, c.Transport = req.Header, "tcp"
	}
	if ss := server.ClientSessionFromContext(ctx); ss != nil {
		c.SessionID = ss.SessionID()
	}
	c.ProtocolVersion = server.RequestProtocolVersion(ctx)
	return c
}

// replyOf is a handler's result as the middleware reads it.
func replyOf(res *mcp.CallToolResult) adapter.Reply {
	if res == nil {
		return adapter.Reply{}
	}
	r := adapter.Reply{Result: res, Transient: len(res.InputRequests) > 0}
	if res.IsError {
		r.ErrorCode = string(idem.CodeNotSaved)
		if res.Meta != nil {
			if code, ok := res.Meta.AdditionalFields[idem.MetaError].(string); ok && code != "" {
				r.ErrorCode = code
			}
		}
	}
	return r
}

// resultOf builds the tool result as idem does on the go-sdk: the
// structured output, and a text copy of it when the handler sent no content
// (or sent content beside an output that is not an object).
func resultOf(a adapter.Answer) *mcp.CallToolResult {
	res, _ := a.Result.(*mcp.CallToolResult)
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if len(a.Meta) > 0 {
		if res.Meta == nil {
			res.Meta = &mcp.Meta{}
		}
		if res.Meta.AdditionalFields == nil {
			res.Meta.AdditionalFields = a.Meta // the answer's own, made for this call
		} else {
			maps.Copy(res.Meta.AdditionalFields, a.Meta)
		}
	}
	if a.Refused {
		res.IsError = true
		res.Content = []mcp.Content{mcp.NewTextContent(a.Text)}
		return res
	}
	if res.IsError || len(res.InputRequests) > 0 || len(a.Structured) == 0 {
		return res
	}
	res.StructuredContent, res.RawStructuredContent = a.Structured, a.Structured
	// mcp-go writes no content and empty content alike ("content": []),
	// so both get the text copy, on a first call and on its replay.
	if len(res.Content) == 0 {
		res.Content = []mcp.Content{mcp.NewTextContent(string(a.Structured))}
	} else if a.Structured[0] != '{' {
		res.Content = append(res.Content, mcp.NewTextContent(string(a.Structured)))
	}
	return res
}

// decodeResult returns a fresh copy of a stored result.
func decodeResult(stored json.RawMessage) (any, error) {
	res := &mcp.CallToolResult{}
	if len(stored) == 0 || string(stored) == "null" {
		return res, nil
	}
	if err := res.UnmarshalJSON(stored); err != nil {
		return nil, errors.New("idem/mcpgo: stored result cannot be decoded")
	}
	return res, nil
}
