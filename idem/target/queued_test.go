package target_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/target"
)

func TestQueued(t *testing.T) {
	req := func(args string, meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x", Arguments: json.RawMessage(args), Meta: meta}}
	}
	if target.Queued(req(`{"a":1}`, nil)) || target.Queued(nil) {
		t.Error("no op id reported as present")
	}
	if !target.Queued(req(`{"op_id":"k"}`, nil)) || !target.Queued(req(`{}`, mcp.Meta{idem.MetaOpID: "k"})) {
		t.Error("op id not seen")
	}
	if !target.Queued(req(`{"op_id":""}`, nil)) {
		t.Error("a malformed op id still marks the call as replayed")
	}
}
