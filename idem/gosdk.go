package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem/internal/adapter"
)

// This file adapts the middleware to the official go-sdk: its tools,
// requests and results to and from package adapter's ToolDef, Call, Reply
// and Answer.

// HandlerFor is a typed tool handler that writes through tx. It mirrors
// [mcp.ToolHandlerFor] with the transaction added: everything it writes
// through tx commits together with the op record, or not at all. It must
// have no effect outside tx: it may run again if its transaction loses a
// race, and it may run, in a transaction that rolls back, on a repeat that
// reaches a handler which has not answered the op lately (see [ReadFirst]).
// Outbound effects go through [AfterCommit]; a handler that talks to the
// client while it runs (progress, elicitation) may want [ReadFirst].
//
// Returning an error, a result with IsError set, or a result with input
// requests rolls the transaction back and stores nothing, so a retry runs
// again. A returned *Error is sent to the caller with its code; any other
// error with code not_saved and the error's text, which must not hold
// argument values either.
//
// A tool that claims to be read-only (readOnlyHint: true), called without
// an op id, runs h in a read-only transaction on stores that have one
// ([backend.ReadOnlyRunner]: memory, SQLite, PostgreSQL): h reads a
// snapshot of what is committed without waiting for writes, and a write
// through tx fails with an error wrapping backend.ErrReadOnly, answered,
// like any error h returns, with code not_saved.
type HandlerFor[In, Out any] func(ctx context.Context, tx Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// AddTool registers h on srv as tool t, wrapped so that it is safe to call
// twice, and makes the tool's metadata say what the wrapping guarantees.
// s is the store h writes, or the server's [Guard] (made once with
// [New]), whose server-wide settings the tool then takes, as get_operation
// and the guarded tools do, so that none of them can disagree:
//
//	guard := idem.New(store, &idem.Options{TTL: 24 * time.Hour, Logger: log})
//	idem.AddTool(srv, t, guard, h, idem.RequireOpID())
//	idem.RegisterStatusTool(srv, guard)
//
// What the wrapping guarantees:
//
//   - IdempotentHint is true only when every repeat of the same arguments has
//     no further effect: the tool has record keys ([RecordKeys]) or requires an op
//     id ([RequireOpID]), or it claims to be read-only, or t's own
//     annotations say so, for a handler whose own logic makes a repeat
//     harmless (a tombstone, a target it refuses to guess). A tool that only
//     accepts an optional op id ([OpID]) says false, and claiming true for
//     one, without keys, is refused: a call without the op id is not safe to
//     repeat. Clients such as agents that reconnect send a lost call again
//     on this hint.
//   - The description says which arguments are record keys and who mints
//     op_id, so a model does not invent one.
//   - The input schema lists the keys (and a required op_id) in required and
//     gains a typed op_id property when the tool accepts op ids and In has
//     none.
//   - Every schema it publishes, the author's types included, is one that
//     strict clients accept: boolean subschemas (from fields of type any)
//     are written as {}.
//
// The other hints are t's as given: only the author knows whether h
// destroys what was there (destructiveHint) or reaches past its own store
// (openWorldHint, which MCP reads as true when absent: say false for a
// tool that touches only s).
//
// A call goes: the op id is checked (invalid_op_id), then the record keys
// (missing_key), then the arguments against the input schema
// (invalid_arguments, naming the argument and what was expected, never the
// value); then h runs in a transaction of s, its output is checked against
// the output schema (as [mcp.AddTool] checks it: an output the schema
// refuses is answered with code internal, and nothing is saved), and with an
// op id its result is stored in that transaction (see [HandlerFor]). Every error the tool
// returns is a tool result with isError set and a [Code] in
// _meta["io.idemkit/error"]; an error h returns is sent with code not_saved
// and h's own message, or with the code of an *[Error] h returned.
//
// t is not modified. AddTool panics, like [mcp.AddTool], if the tool claims
// to be both read-only and destructive, or idempotent with only an optional
// op id, if a key names no input property, if
// a schema cannot be inferred, or if a schema holds a false subschema where
// strict clients reject it.
func AddTool[In, Out any](srv *mcp.Server, t *mcp.Tool, s Store, h HandlerFor[In, Out], opts ...Option) {
	srv.AddTool(Tool(t, s, h, opts...))
}

// Tool returns what [AddTool] registers: the tool's honest description and a
// handler that does everything a call needs (the checks, the validation, the
// transaction, the refusals), for servers that register tools their own way:
//
//	srv.AddTool(idem.Tool(t, store, h, idem.RecordKeys("slug")))
//
// The pair must be registered together: the handler validates calls against
// the returned tool's input schema. Tool panics where AddTool does.
func Tool[In, Out any](t *mcp.Tool, s Store, h HandlerFor[In, Out], opts ...Option) (*mcp.Tool, mcp.ToolHandler) {
	c, s := configFor(s, opts)
	tt, err := sdkTool(t, c, s, h)
	if err != nil {
		panic(fmt.Sprintf("idem: tool %q: %v", t.Name, err))
	}
	return published(t, tt.def), handlerOf(tt.serve)
}

// sdkTool wraps h, a go-sdk handler, for tool t.
func sdkTool[In, Out any](t *mcp.Tool, c *config, s Store, h HandlerFor[In, Out]) (*tool, error) {
	return newTool(toolDef(t), c, s, adapter.For(func(ctx context.Context, tx Tx, c *adapter.Call, in In) (adapter.Reply, Out, error) {
		res, out, err := h(ctx, tx, c.Request.(*mcp.CallToolRequest), in)
		return replyOf(res), out, err
	}), decodeResult)
}

// RegisterStatusTool adds the read-only get_operation(tool, op_id) tool to
// srv (readOnlyHint: true, destructiveHint and openWorldHint: false). It
// answers status "committed" with the stored result when a live op record
// exists in the caller's scope, and "not_committed" otherwise: the operation
// never committed, or its record outlived its TTL. Callers use it after an
// unknown_outcome (or a lost response) to decide whether to send the
// operation again, with the same op id. Every refusal says what a lookup
// needs, with a [Code], and quotes nothing the caller sent.
//
// s is the server's [Guard], whose scope, logger and clock it takes, as
// the tools registered on it do; or a store, with the defaults.
func RegisterStatusTool(srv *mcp.Server, s Store) {
	w, err := statusTool(s, decodeResult)
	if err != nil {
		panic(err.Error())
	}
	t := &mcp.Tool{Name: w.Def.Name, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}}
	srv.AddTool(published(t, w.Def), handlerOf(w.Call))
}

// toolDef is t as the middleware reads it.
func toolDef(t *mcp.Tool) adapter.ToolDef {
	def := adapter.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Meta: t.Meta}
	if a := t.Annotations; a != nil {
		def.ReadOnly, def.Idempotent = a.ReadOnlyHint, a.IdempotentHint
		def.Destructive = a.DestructiveHint != nil && *a.DestructiveHint
	}
	return def
}

// published is t as def, the published definition, says.
func published(t *mcp.Tool, def adapter.ToolDef) *mcp.Tool {
	tt := *t
	var ann mcp.ToolAnnotations
	if t.Annotations != nil {
		ann = *t.Annotations
	}
	ann.IdempotentHint = def.Idempotent
	tt.Annotations = &ann
	tt.Description, tt.Meta = def.Description, def.Meta
	tt.InputSchema = def.InputSchema
	tt.OutputSchema = def.OutputSchema
	return &tt
}

// handlerOf is the go-sdk tool handler of a wrapped tool's serve. It
// answers every call with a result, never a protocol error.
func handlerOf(serve func(context.Context, *adapter.Call) adapter.Answer) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req == nil || req.Params == nil {
			return resultOf(refusal(newError(CodeInternal, "no tool call request"))), nil
		}
		return resultOf(serve(ctx, callOf(req))), nil
	}
}

// callOf is req as the middleware reads it.
func callOf(req *mcp.CallToolRequest) *adapter.Call {
	c := &adapter.Call{Tool: req.Params.Name, Arguments: req.Params.Arguments, Meta: req.Params.Meta, Request: req, Transport: "pipe"}
	if e := req.Extra; e != nil {
		if e.Header != nil {
			c.Header, c.Transport = e.Header, "tcp"
		}
		switch {
		case e.TokenInfo != nil:
			c.Authenticated, c.User = true, e.TokenInfo.UserID
		case e.Header.Get("Authorization") != "":
			// Credentials the server checks on its own (in a middleware of
			// its HTTP handler): a caller, but not one the SDK knows.
			c.Authenticated = true
		}
	}
	if ss := req.Session; ss != nil {
		c.SessionID = ss.ID()
		if p := ss.InitializeParams(); p != nil {
			c.ProtocolVersion = p.ProtocolVersion
		}
	}
	return c
}

// replyOf is a handler's result as the middleware reads it.
func replyOf(res *mcp.CallToolResult) adapter.Reply {
	if res == nil {
		return adapter.Reply{}
	}
	r := adapter.Reply{Result: res, Transient: res.InputRequests != nil}
	if res.IsError {
		r.ErrorCode = string(CodeNotSaved)
		if code, ok := res.Meta[MetaError].(string); ok && code != "" {
			r.ErrorCode = code
		}
	}
	return r
}

// resultOf builds the tool result as the SDK does for typed handlers: the
// structured output, and a text copy of it when the handler sent no content
// (or sent content beside an output that is not an object).
func resultOf(a adapter.Answer) *mcp.CallToolResult {
	res, _ := a.Result.(*mcp.CallToolResult)
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	switch {
	case len(a.Meta) == 0:
	case res.Meta == nil:
		res.Meta = a.Meta // the answer's own, made for this call
	default:
		maps.Copy(res.Meta, a.Meta)
	}
	if a.Refused {
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: a.Text}}
		return res
	}
	if res.IsError || res.InputRequests != nil || len(a.Structured) == 0 {
		return res
	}
	res.StructuredContent = a.Structured
	if res.Content == nil {
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(a.Structured)}}
	} else if a.Structured[0] != '{' {
		res.Content = append(res.Content, &mcp.TextContent{Text: string(a.Structured)})
	}
	return res
}

// decodeResult returns a fresh copy of a stored result.
func decodeResult(stored json.RawMessage) (any, error) {
	res := &mcp.CallToolResult{}
	if len(stored) == 0 || string(stored) == "null" {
		return res, nil
	}
	// The SDK's own decoder, called directly: json.Unmarshal would first
	// scan the whole result to validate it, which the decoder does anyway.
	if err := res.UnmarshalJSON(stored); err != nil {
		return nil, errors.New("idem: stored result cannot be decoded")
	}
	// The text copy of the output is made only for a nil Content, and the
	// SDK decodes "content": null as an empty slice: give the replay the nil
	// the handler returned, so it is filled the same way.
	if len(res.Content) > 0 {
		return res, nil
	}
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(stored, &probe) == nil && (len(probe.Content) == 0 || string(probe.Content) == "null") {
		res.Content = nil
	}
	return res, nil
}
