// Package adapter is what an adapter to an MCP library hands the
// middleware of package idem and gets back from it, in no library's types.
// Package idem adapts it to the official go-sdk, and the module
// github.com/idemkit/sdk/idem/mcpgo to mark3labs/mcp-go. It is internal: a
// server author uses an adapter, not this.
package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	sjson "github.com/segmentio/encoding/json"

	"github.com/idemkit/sdk/idem/backend"
)

// A ToolDef is a tool as an adapter hands it to [Wrap]: the author's
// definition, in no library's types. Wrap returns the one to publish.
type ToolDef struct {
	Name        string
	Description string
	// The annotations the middleware reads: readOnlyHint, destructiveHint
	// set to true, idempotentHint. In the published ToolDef, Idempotent is
	// the idempotentHint to publish.
	ReadOnly, Destructive, Idempotent bool
	// InputSchema is the author's input schema (*jsonschema.Schema, JSON, a
	// map) or nil, to infer it from In; OutputSchema likewise, from Out. In
	// the published ToolDef both are map[string]any, OutputSchema nil for
	// none.
	InputSchema, OutputSchema any
	// Meta is the tool's _meta.
	Meta map[string]any
}

// A Call is one tools/call request, as an adapter hands it to a wrapped
// tool.
type Call struct {
	Tool      string          // params.name
	Arguments json.RawMessage // params.arguments as sent; nil when absent
	Meta      map[string]any  // params._meta
	// Authenticated says the caller presented credentials (a token the
	// transport verified, or an Authorization header the server checks on
	// its own), and User is its user id, the default scope, when known. An authenticated call without a
	// user id is refused an op id (scope_required): its operations could
	// not be kept apart from other callers'.
	Authenticated bool
	User          string
	// SessionID and ProtocolVersion go on the call's span; "" for none.
	SessionID, ProtocolVersion string
	// Header is the header of the HTTP request the call came in, nil for a
	// call that did not come over HTTP; Transport is "tcp" for one that
	// did, "pipe" for one that did not. Both are for the Tracer.
	Header    http.Header
	Transport string
	// Request is the library's own request, for the handler and for a
	// scope function.
	Request any
}

// A Reply is a handler's tool result, as an adapter reports it to the
// middleware.
type Reply struct {
	// Result is the library's result, nil for none. With an op id, the op
	// record stores it as encoding/json writes it, and the Decoder reads
	// it back for a replay.
	Result any
	// ErrorCode is set for an error result (isError): it is answered, not
	// stored, and its transaction rolls back. It is the result's own code,
	// or not_saved.
	ErrorCode string
	// Transient marks a result that is answered but not stored, and whose
	// transaction rolls back, such as a request for input.
	Transient bool
	// NotDone says that the effect of a guarded call that failed (an
	// error result, or a protocol error) certainly did not happen: its
	// claim is released. Without it the outcome is unknown.
	NotDone bool
}

// An Answer is how a wrapped tool answers a call. The adapter makes its
// library's result from it: Result, or an empty one, with Meta's members
// set in its _meta; for a refusal, IsError and Text as its only content;
// otherwise Structured as its structured content, with a text copy of it
// where the library makes one for typed handlers.
type Answer struct {
	Result     any             // the handler's result, or a fresh decode of the stored one; nil for none
	Structured json.RawMessage // the handler's output, nil for none
	Meta       map[string]any  // _meta members to set: replayed, or an error's code, candidates and op id; made for this answer, the adapter may keep it
	Refused    bool            // the middleware refused the call: IsError, with Text
	Text       string
	// Passed: Result is the guarded handler's own result, or Err its
	// protocol error, answered as it is; for a result, with Meta's members
	// set and Text, when not empty, added as a text block.
	Passed bool
	Err    error
}

// A Wrapped is a tool wrapped by [Wrap]: what to publish, and how to answer
// a call.
type Wrapped struct {
	Def  ToolDef
	Call func(ctx context.Context, c *Call) Answer
}

// A Handler is a tool's handler with its types erased: the middleware
// decodes a call's arguments into a fresh In with Decode, and calls Call
// with it.
type Handler struct {
	In, Out reflect.Type
	Decode  func(args json.RawMessage) (any, error)
	Call    func(ctx context.Context, tx backend.Tx, c *Call, in any) (Reply, any, error)
}

// For erases the types of h, a handler in library-neutral form: an
// adapter's wrapper around its library's typed handler, which finds the
// library's request in c.Request.
func For[In, Out any](h func(ctx context.Context, tx backend.Tx, c *Call, in In) (Reply, Out, error)) Handler {
	return Handler{
		In:  reflect.TypeFor[In](),
		Out: reflect.TypeFor[Out](),
		Decode: func(args json.RawMessage) (any, error) {
			// As the go-sdk decodes a tool's input: segmentio's decoder,
			// with names matched exactly, as the input schema reads them.
			// (encoding/json's case-insensitive match would fill a field
			// from a member the schema did not check, such as "TEXT" for
			// "text" under a schema that allows other members.)
			var in In
			rest, err := sjson.Parse(args, &in, sjson.DontMatchCaseInsensitiveStructFields)
			if err == nil && len(rest) != 0 {
				err = errors.New("adapter: arguments hold more than one JSON value")
			}
			return in, err
		},
		Call: func(ctx context.Context, tx backend.Tx, c *Call, in any) (Reply, any, error) {
			return h(ctx, tx, c, in.(In))
		},
	}
}

// A Decoder turns a stored result (its JSON, "null" for none) into a fresh
// value of the library's result type.
type Decoder func(json.RawMessage) (any, error)

// Guarded is a Guard's middleware in no library's types.
type Guarded interface {
	// Guards reports whether calls of the tool named name go through Call.
	Guards(name string) bool
	// Publish returns def, a guarded tool as the server lists it, as it is
	// published; ok is false for a tool that is not guarded, or whose
	// definition cannot be: publish def as it is.
	Publish(ctx context.Context, def ToolDef) (pub ToolDef, ok bool)
	// Status is get_operation as published.
	Status() ToolDef
	// ListsStatus reports whether get_operation is to be listed.
	ListsStatus() bool
	// Call answers c, a call of the guarded tool def: a refusal, a
	// replay, or run's own answer (Answer.Passed).
	Call(ctx context.Context, def ToolDef, c *Call, run func(ctx context.Context, args json.RawMessage) (Reply, error)) Answer
	// Lookup answers c, a call of get_operation.
	Lookup(ctx context.Context, c *Call) Answer
}

// What package idem lends its adapters. It sets them when it is
// initialized, before any code of a package that imports it runs. Values
// typed any are idem's own: opts is []idem.Option, g an *idem.Guard, tools
// idem.Tools, p an idem.Pending; an Option is returned as any.
var (
	// NewGuard is idem.New with the scope as a function of a Call (nil
	// for the default); opts is an *idem.Options.
	NewGuard func(s backend.Store, opts any, scope func(ctx context.Context, c *Call) string) any
	// Guard returns g's middleware for tools.
	Guard func(g any, tools any, decode Decoder) Guarded
	// Wrap wraps h for tool def on s (a store, or an *idem.Guard), as
	// idem.AddTool does: what to publish, and how to answer a call.
	Wrap func(def ToolDef, s backend.Store, h Handler, decode Decoder, opts any) (*Wrapped, error)
	// WrapStatus wraps get_operation on s, as idem.RegisterStatusTool adds it.
	WrapStatus func(s backend.Store, decode Decoder) (*Wrapped, error)
	// Reconcile is idem.Reconcile with the call as a Call.
	Reconcile func(f func(ctx context.Context, c *Call, p any) (any, error)) any
	// HasOpID reports whether c carries an op id, as the op_id argument
	// or in _meta, well formed or not: such a call is queued or replayed.
	HasOpID func(c *Call) bool
)
