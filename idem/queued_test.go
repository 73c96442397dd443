package idem_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

func TestHasOpID(t *testing.T) {
	req := func(args string, meta mcp.Meta) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x", Arguments: json.RawMessage(args), Meta: meta}}
	}
	if idem.HasOpID(req(`{"a":1}`, nil)) || idem.HasOpID(nil) {
		t.Error("no op id reported as present")
	}
	if !idem.HasOpID(req(`{"op_id":"k"}`, nil)) || !idem.HasOpID(req(`{}`, mcp.Meta{idem.MetaOpID: "k"})) {
		t.Error("op id not seen")
	}
	if !idem.HasOpID(req(`{"op_id":""}`, nil)) {
		t.Error("a malformed op id still marks the call as replayed")
	}
}
