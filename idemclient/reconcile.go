package idemclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status is what the server says of an operation.
type Status string

const (
	// Committed: the operation committed; do not send it again.
	Committed Status = "committed"
	// NotCommitted: the server holds no live record of it: it never
	// committed, or its record outlived the server's TTL. Send it again
	// with the same op id.
	NotCommitted Status = "not_committed"
)

// statusTool is the read-only tool of idem servers that Reconcile asks.
const statusTool = "get_operation"

// Reconcile asks the server's get_operation tool whether the operation
// sent to tool with opID committed, typically with the Tool and OpID of an
// *UnknownOutcomeError. A call without an op id cannot be looked up: check
// the target's own state instead. get_operation is read-only, so a lost
// answer to it is sent again like any read-only call of a trusted server.
func (c *Client) Reconcile(ctx context.Context, tool, opID string) (Status, error) {
	if opID == "" {
		return "", errors.New("idemclient: the call carried no op id, so the server cannot say whether it committed; check the target's state")
	}
	res, err := c.CallTool(ctx, &mcp.CallToolParams{
		Name:      statusTool,
		Arguments: map[string]string{"tool": tool, "op_id": opID},
	})
	if err != nil {
		return "", fmt.Errorf("idemclient: asking %s: %w", statusTool, err)
	}
	if res.IsError {
		return "", fmt.Errorf("idemclient: %s refused: %s", statusTool, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", fmt.Errorf("idemclient: %s answered structured content that cannot be read: %w", statusTool, err)
	}
	var out struct {
		Status Status `json:"status"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("idemclient: %s answered structured content that cannot be read: %w", statusTool, err)
	}
	switch out.Status {
	case Committed, NotCommitted:
		return out.Status, nil
	}
	return "", fmt.Errorf("idemclient: %s answered no known status", statusTool)
}

// text is the text content of res, for an error message.
func text(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "no message"
}
