package idem

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StatusToolName is the name of the tool [RegisterStatusTool] adds.
const StatusToolName = "get_operation"

// OperationQuery is the input of the get_operation tool.
type OperationQuery struct {
	Tool string `json:"tool" jsonschema:"the name of the tool the operation was sent to"`
	OpID string `json:"op_id" jsonschema:"the op id the operation was sent with"`
}

// OperationStatus is the output of the get_operation tool.
type OperationStatus struct {
	// Status is "committed" or "not_committed".
	Status string `json:"status"`
	// Result is the tool result the handler returned, for committed
	// operations (null when it returned none and the answer was its typed
	// output alone).
	Result any `json:"result,omitempty"`
	// Output is the handler's typed output: the structuredContent of the
	// first answer.
	Output any `json:"output,omitempty"`
	// CommittedAt is when the operation committed.
	CommittedAt *time.Time `json:"committed_at,omitempty"`
}

// The statuses get_operation answers.
const (
	StatusCommitted    = "committed"
	StatusNotCommitted = "not_committed"
)

// RegisterStatusTool adds the read-only get_operation(tool, op_id) tool to
// srv. It answers "committed" with the stored result when a live op record
// exists in the caller's scope, and "not_committed" otherwise: the operation
// never committed, or its record outlived its TTL. Callers use it after an
// unknown_outcome (or a lost response) to decide whether to send the
// operation again, with the same op id.
//
// Of opts, [Scope] and [RequireScope] apply; pass the same ones as the tools.
func RegisterStatusTool(srv *mcp.Server, s Store, opts ...Option) {
	c := newConfig(opts)
	installRefusalCleanup(srv)
	t := &mcp.Tool{
		Name: StatusToolName,
		Description: "Look up whether an operation sent with an op_id committed, and its result. " +
			"Use it after an unknown_outcome error or a lost response, before sending the operation again with the same op_id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false)},
	}
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, q OperationQuery) (*mcp.CallToolResult, OperationStatus, error) {
		var zero OperationStatus
		if err := ValidateOpID(q.OpID); err != nil {
			return refusalOf(err), zero, nil
		}
		scope, refused := c.opScope(ctx, req)
		if refused != nil {
			return refusal(refused), zero, nil
		}
		rec, err := LookupOp(ctx, s, scope, q.Tool, q.OpID)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, OperationStatus{Status: StatusNotCommitted}, nil
		case err != nil:
			c.logger.ErrorContext(ctx, "idem: get_operation lookup failed", "error", err.Error())
			return refusal(NewError(CodeInternal, "the operation could not be looked up; retry")), zero, nil
		}
		at := rec.CommittedAt
		st := OperationStatus{Status: StatusCommitted, CommittedAt: &at}
		if len(rec.Result) > 0 && string(rec.Result) != "null" {
			st.Result = rec.Result
		}
		if len(rec.Output) > 0 && string(rec.Output) != "null" {
			st.Output = rec.Output
		}
		return nil, st, nil
	})
}
