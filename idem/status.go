package idem

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	Status string `json:"status" jsonschema:"committed or not_committed"`
	// Result is the tool result the handler returned (null when it
	// returned none and the answer was its structured output alone).
	Result any `json:"result,omitempty" jsonschema:"for committed operations: the tool result the handler returned"`
	// Output is the structured content of the first answer.
	Output      any        `json:"output,omitempty" jsonschema:"for committed operations: the structured content of the first answer"`
	CommittedAt *time.Time `json:"committed_at,omitempty" jsonschema:"for committed operations: when it committed"`
}

// RegisterStatusTool adds the read-only get_operation(tool, op_id) tool to
// srv. It answers status "committed" with the stored result when a live op
// record exists in the caller's scope, and "not_committed" otherwise: the
// operation never committed, or its record outlived its TTL. Callers use it
// after an unknown_outcome (or a lost response) to decide whether to send
// the operation again, with the same op id.
//
// Of opts, [Scope], [RequireScope] and [Logger] apply; pass the same ones as
// the tools.
func RegisterStatusTool(srv *mcp.Server, s Store, opts ...Option) {
	c := newConfig(opts)
	t := &mcp.Tool{
		Name: statusToolName,
		Description: "Look up whether an operation sent with an op_id committed, and its result. " +
			"Use it after an unknown_outcome error or a lost response, before sending the operation again with the same op_id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)},
	}
	lookup := func(ctx context.Context, tx Tx, req *mcp.CallToolRequest, q operationQuery) (*mcp.CallToolResult, operationStatus, error) {
		var zero operationStatus
		opID, refused := lookupOpID(q.OpID, req.Params.Meta)
		if refused != nil {
			return nil, zero, refused
		}
		scope, refused := c.opScope(ctx, req)
		if refused != nil {
			return nil, zero, refused
		}
		var rec oprecord.Record
		_, err := tx.Get(ctx, oprecord.Key(scope, q.Tool, opID), &rec)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, operationStatus{Status: "not_committed"}, nil
		case err != nil:
			c.logger.ErrorContext(ctx, "idem: get_operation lookup failed", "error", err.Error())
			return nil, zero, newError(CodeInternal, "the operation could not be looked up; retry")
		}
		at := rec.CommittedAt
		st := operationStatus{Status: "committed", CommittedAt: &at}
		if len(rec.Result) > 0 && string(rec.Result) != "null" {
			st.Result = rec.Result
		}
		if out := rec.StructuredOutput(); out != nil {
			st.Output = out
		}
		return nil, st, nil
	}
	tt, err := newTool(t, c, s, lookup)
	if err != nil {
		panic("idem.RegisterStatusTool: " + err.Error())
	}
	srv.AddTool(tt.desc, tt.handle)
}

// lookupOpID returns the op id a get_operation call asks about: the op_id
// argument or _meta["io.idemkit/op_id"], as a tool call carries it.
func lookupOpID(arg string, meta mcp.Meta) (string, *Error) {
	if v, ok := meta[MetaOpID]; ok {
		fromMeta, isStr := v.(string)
		switch {
		case !isStr:
			return "", newError(CodeInvalidOpID, "the _meta op id must be a string")
		case arg != "" && arg != fromMeta:
			return "", newError(CodeInvalidOpID, "op_id argument and _meta op id differ; send one")
		}
		arg = fromMeta
	}
	if arg == "" {
		return "", newError(CodeInvalidOpID, "get_operation looks up an operation by the op id it was sent with (the op_id argument or _meta io.idemkit/op_id); "+
			"a call sent without an op id has no record here: check its effect with the server's own read tools")
	}
	return arg, validateOpID(arg)
}
