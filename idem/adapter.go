package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// This file is the middleware's side of an adapter to an MCP library. The
// middleware itself knows no MCP library: it takes a [Call] and answers an
// [Answer]. [AddTool] and [Tool] adapt it to the official go-sdk; the module
// github.com/idemkit/sdk/idem/mcpgo adapts it to mark3labs/mcp-go. A server
// author uses an adapter, not what follows.

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
	// Request is the library's own request, for the handler and for a
	// scope function (see [ScopeFunc]).
	Request any
}

// HasOpID reports whether the call carries an op id, as the op_id argument
// or in _meta, well formed or not: such a call is queued or replayed (see
// [TargetQuery]).
func (c *Call) HasOpID() bool {
	args, _ := parseArgs(c.Arguments)
	id, err := opIDOf(args, c.Meta)
	return id != "" || err != nil
}

// A Reply is a handler's tool result, as an adapter reports it to the
// middleware.
type Reply struct {
	// Result is the library's result, nil for none. With an op id, the op
	// record stores it as encoding/json writes it, and [Wrap]'s decode reads
	// it back for a replay.
	Result any
	// ErrorCode is set for an error result (isError): it is answered, not
	// stored, and its transaction rolls back. It is the result's own code,
	// or not_saved.
	ErrorCode Code
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

// WrappedHandler is a handler in library-neutral form: an adapter's wrapper
// around its library's typed handler, which finds the library's request in
// c.Request. It follows the rules of [HandlerFor].
type WrappedHandler[In, Out any] func(ctx context.Context, tx Tx, c *Call, in In) (Reply, Out, error)

// Wrap wraps h, a handler for tool def, as [AddTool] does: the same
// checks, transaction, op record, replay and refusals, and the same
// published definition. decode turns a stored result (its JSON, "null" for
// none) into a fresh value of the library's result type. Wrap fails where
// AddTool panics.
func Wrap[In, Out any](def ToolDef, s Store, h WrappedHandler[In, Out], decode func(json.RawMessage) (any, error), opts ...Option) (*Wrapped, error) {
	c, s := configFor(s, opts)
	t, err := newTool(def, c, s, h, decode)
	if err != nil {
		return nil, fmt.Errorf("idem: tool %q: %w", def.Name, err)
	}
	return &Wrapped{Def: t.def, Call: t.serve}, nil
}

// WrapStatus wraps the get_operation tool, as [RegisterStatusTool] adds it.
func WrapStatus(s Store, decode func(json.RawMessage) (any, error), opts ...Option) (*Wrapped, error) {
	return statusTool(s, decode, opts...)
}

// ScopeFunc sets who an op belongs to, as [Scope] does, from a [Call]: for
// adapters, whose scope options find their library's request in c.Request.
func ScopeFunc(f func(ctx context.Context, c *Call) string) Option {
	return Option{server: "Scope", apply: func(c *config) {
		if f == nil {
			c.invalid("Scope needs a function")
			return
		}
		c.scope, c.customScope = f, true
	}}
}

// serve answers one call: the answer, or the refusal, that call gives,
// reported to the logger, the span, the metrics and the Observe hook.
func (t *tool[In, Out]) serve(ctx context.Context, c *Call) Answer {
	start := time.Now()
	ctx, span := t.c.instruments.start(ctx, c)
	o := &op{tool: c.Tool}
	a, refused := t.call(ctx, o, c)
	var ans Answer
	if refused != nil {
		ans = refusal(refused)
	} else {
		ans = a.answer()
	}
	outcome, code := outcomeOf(a, refused)
	t.report(ctx, span, c, o, outcome, code, time.Since(start))
	return ans
}

// answer is what a call that was not refused sends back.
func (a *answer) answer() Answer {
	ans := Answer{Result: a.res, Structured: a.out}
	switch {
	case a.replayed:
		ans.Meta = map[string]any{MetaReplayed: true}
	case a.code != "":
		ans.Meta = map[string]any{MetaError: string(a.code)}
	}
	return ans
}

// refusal is the answer to a call the middleware refused with e.
func refusal(e *Error) Answer {
	meta := map[string]any{MetaError: string(e.Code)}
	text := e.Message
	if len(e.Candidates) > 0 {
		meta[metaCandidates] = e.Candidates
		b, _ := json.Marshal(e.Candidates)
		text += " Candidates: " + string(b)
	}
	if e.OpID != "" {
		meta[MetaOpID] = e.OpID
	}
	return Answer{Meta: meta, Refused: true, Text: text}
}
