package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/internal/adapter"
	"github.com/idemkit/sdk/internal/oprecord"
)

// statusToolName is the name of the tool RegisterStatusTool adds.
const statusToolName = "get_operation"

// operationQuery is the input of the get_operation tool.
type operationQuery struct {
	Tool string `json:"tool" jsonschema:"the name of the tool the operation was sent to"`
	// OpID may come in _meta["io.idemkit/op_id"] instead, as on the tool
	// the operation was sent to.
	OpID string `json:"op_id,omitempty" jsonschema:"the op id the operation was sent with (or send it in _meta io.idemkit/op_id)"`
}

// operationStatus is the output of the get_operation tool.
type operationStatus struct {
	Status string `json:"status" jsonschema:"committed, not_committed, in_progress (still running) or unknown (it ended without an answer, and whether it took effect cannot be told yet)"`
	// Result is the tool result the handler returned (null when it
	// returned none and the answer was its structured output alone).
	Result any `json:"result,omitempty" jsonschema:"for committed operations: the tool result the handler returned"`
	// Output is the structured content of the first answer.
	Output      any        `json:"output,omitempty" jsonschema:"for committed operations: the structured content of the first answer"`
	CommittedAt *time.Time `json:"committed_at,omitempty" jsonschema:"for committed operations: when it committed"`
}

// statusTool wraps get_operation (see RegisterStatusTool).
func statusTool(s Store, decode adapter.Decoder) (*adapter.Wrapped, error) {
	c, s := configFor(s, nil)
	def := adapter.ToolDef{
		Name: statusToolName,
		Description: "Look up whether an operation sent with an op_id committed, and its result. " +
			"Use it after an unknown_outcome error or a lost response, before sending the operation again with the same op_id. " +
			"A call sent without an op_id has no record here.",
		ReadOnly: true,
	}
	lookup := func(ctx context.Context, tx Tx, call *adapter.Call, q operationQuery) (adapter.Reply, operationStatus, error) {
		var zero operationStatus
		opID, refused := lookupOpID(q.OpID, call.Meta)
		if refused != nil {
			return adapter.Reply{}, zero, refused
		}
		scope, refused := lookupScope(ctx, c, call)
		if refused != nil {
			return adapter.Reply{}, zero, refused
		}
		var rec oprecord.Record
		_, err := tx.Get(ctx, oprecord.Key(scope, q.Tool, opID), &rec)
		switch {
		case errors.Is(err, ErrNotFound):
			return adapter.Reply{}, operationStatus{Status: "not_committed"}, nil
		case err != nil:
			c.logger.ErrorContext(ctx, "idem: get_operation lookup failed", "error", err.Error())
			return adapter.Reply{}, zero, newError(CodeInternal, lookupFailedMessage)
		}
		return adapter.Reply{}, statusOf(&rec, c.now()), nil
	}
	t, err := newTool(def, c, s, adapter.For(lookup), decode)
	if err != nil {
		return nil, fmt.Errorf("idem: %s: %w", statusToolName, err)
	}
	t.pre = func(ctx context.Context, call *adapter.Call) *Error { return checkLookup(ctx, c, call) }
	return &adapter.Wrapped{Def: t.def, Call: t.serve}, nil
}

// What get_operation's refusals say: what a lookup needs, never a value the
// caller sent.
const (
	lookupShapeMessage  = `get_operation takes {"tool": the name of the tool the operation was sent to, "op_id": the op id it was sent with}`
	lookupToolMessage   = `get_operation needs "tool": the name of the tool the operation was sent to, as a string`
	lookupExtraMessage  = `get_operation takes only "tool" and "op_id" (the op id may come in _meta io.idemkit/op_id instead)`
	lookupTypeMessage   = "get_operation needs the op id the operation was sent with, as a string (the op_id argument or _meta io.idemkit/op_id)"
	lookupDifferMessage = "the op_id argument and the _meta op id differ: a lookup names one operation; send its op id once"
	lookupNoOpIDMessage = "get_operation looks up an operation by the op id it was sent with (the op_id argument or _meta io.idemkit/op_id); " +
		"a call sent without an op id has no record here: check its effect with the server's own read tools"
	lookupBadOpIDMessage = "no operation was sent with this op id: an op id is 1 to 128 printable ASCII characters without spaces; look up the op id the call carried"
	lookupScopeMessage   = "get_operation answers only the caller that sent the operation: send the credentials the call was sent with"
	lookupNoUserMessage  = "the caller is authenticated but the server knows no user id for it, so the operations it sent cannot be told from other callers'; the server must say who its callers are (a token verifier that sets the user id, or a Scope)"
	lookupFailedMessage  = "the operation could not be looked up, which says nothing of whether it committed: ask again before sending it again"
)

// checkLookup refuses a get_operation call that cannot name one operation
// of its caller, before the middleware's own checks, whose words are about
// writes: the arguments' shape, then the op id, the tool's name, other
// arguments, the caller's scope.
func checkLookup(ctx context.Context, c *config, call *adapter.Call) *Error {
	raw := bytes.TrimSpace(call.Arguments)
	var args map[string]json.RawMessage
	if len(raw) > 0 && (raw[0] != '{' || json.Unmarshal(raw, &args) != nil) {
		return newError(CodeInvalidArguments, lookupShapeMessage)
	}
	q := operationQuery{}
	if v, ok := args[opIDArgument]; ok {
		s, isStr := stringOf(v)
		if !isStr {
			return newError(CodeInvalidOpID, lookupTypeMessage)
		}
		q.OpID = s
	}
	if _, refused := lookupOpID(q.OpID, call.Meta); refused != nil {
		return refused
	}
	if tool, ok := stringOf(args["tool"]); !ok || tool == "" {
		return newError(CodeInvalidArguments, lookupToolMessage)
	}
	for name := range args {
		if name != "tool" && name != opIDArgument {
			return newError(CodeInvalidArguments, lookupExtraMessage)
		}
	}
	_, refused := lookupScope(ctx, c, call)
	return refused
}

// lookupScope returns the caller's scope, or a refusal in a lookup's words.
func lookupScope(ctx context.Context, c *config, call *adapter.Call) (string, *Error) {
	scope, refused := c.opScope(ctx, call)
	switch {
	case refused == nil:
		return scope, nil
	case c.requireScope:
		return "", newError(CodeScopeRequired, lookupScopeMessage)
	}
	return "", newError(CodeScopeRequired, lookupNoUserMessage)
}

// lookupOpID returns the op id a get_operation call asks about: the op_id
// argument or _meta["io.idemkit/op_id"], as a tool call carries it.
func lookupOpID(arg string, meta map[string]any) (string, *Error) {
	if v, ok := meta[MetaOpID]; ok {
		fromMeta, isStr := v.(string)
		switch {
		case !isStr:
			return "", newError(CodeInvalidOpID, lookupTypeMessage)
		case arg != "" && arg != fromMeta:
			return "", newError(CodeInvalidOpID, lookupDifferMessage)
		}
		arg = fromMeta
	}
	if arg == "" {
		return "", newError(CodeInvalidOpID, lookupNoOpIDMessage)
	}
	if validateOpID(arg) != nil {
		return "", newError(CodeInvalidOpID, lookupBadOpIDMessage)
	}
	return arg, nil
}

// statusOf is what get_operation says of rec, read at now.
func statusOf(rec *oprecord.Record, now time.Time) operationStatus {
	switch stateOf(rec, now) {
	case claimHeld:
		return operationStatus{Status: "in_progress"}
	case claimUnknown:
		return operationStatus{Status: "unknown"}
	}
	at := rec.CommittedAt
	st := operationStatus{Status: "committed", CommittedAt: &at}
	if len(rec.Result) > 0 && string(rec.Result) != "null" {
		st.Result = rec.Result
	}
	if out := rec.StructuredOutput(); out != nil {
		st.Output = out
	}
	return st
}

// lookupRecord reads the op record at k for get_operation: in a read-only
// transaction on a store that has them ([backend.ReadOnlyRunner]), so that
// a lookup does not wait for the transactions that write.
func lookupRecord(ctx context.Context, s Store, k Key) (*oprecord.Record, error) {
	ro, ok := s.(backend.ReadOnlyRunner)
	if !ok {
		return oprecord.Get(ctx, s, k)
	}
	var rec oprecord.Record
	err := ro.RunReadOnly(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Get(ctx, k, &rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// lookup answers get_operation for a Guard, whose guarded tools (ps) may
// settle an unknown outcome with their reconcile function, inside this
// request of the operation's caller.
func (g *Guard) lookup(ctx context.Context, ps map[string]*policy, c *adapter.Call, decode func(json.RawMessage) (any, error)) adapter.Answer {
	if refused := checkLookup(ctx, g.c, c); refused != nil {
		return refusal(refused)
	}
	var q operationQuery
	_ = json.Unmarshal(c.Arguments, &q) // its shape is checked
	opID, _ := lookupOpID(q.OpID, c.Meta)
	scope, _ := lookupScope(ctx, g.c, c)
	k := oprecord.Key(scope, q.Tool, opID)
	rec, err := lookupRecord(context.WithoutCancel(ctx), g.s, k)
	var st operationStatus
	switch {
	case errors.Is(err, ErrNotFound):
		st.Status = "not_committed"
	case err != nil:
		g.c.logger.ErrorContext(ctx, "idem: get_operation lookup failed", "error", err.Error())
		return refusal(newError(CodeInternal, lookupFailedMessage))
	default:
		st = statusOf(rec, g.c.now())
		if p := ps[q.Tool]; p != nil && st.Status == "unknown" {
			_, done, ok := g.reconcile(ctx, decode, p.c, c, k, rec, upstreamKey(scope, q.Tool, opID))
			switch {
			case ok && done != nil:
				st = statusOf(done, g.c.now())
			case ok:
				st = operationStatus{Status: "not_committed"}
			}
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return refusal(newError(CodeInternal, lookupFailedMessage))
	}
	return adapter.Answer{Structured: b}
}
