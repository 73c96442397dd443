package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// A result that asks the client for input is answered but never stored, and
// the handler's writes roll back: the client's retry with InputResponses
// runs the handler again.
func TestInputRequestsAreNeverStored(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	k := idem.Key{Collection: "notes", ID: "n"}
	runs := 0
	h := idem.Tool(s, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		runs++
		if err := tx.Put(ctx, k, in); err != nil {
			return nil, nil, err
		}
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?"}}}, nil, nil
		}
		return nil, nil, nil
	}, idem.OpID())
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add", Arguments: json.RawMessage(`{"text":"x","op_id":"op-mrtr"}`)}}
	res, _, err := h(ctx, req, Note{Text: "x"})
	if err != nil || res == nil || res.InputRequests == nil {
		t.Fatalf("first call: %v %+v", err, res)
	}
	if _, err := idem.LookupOp(ctx, s, "", "add", "op-mrtr"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("input-required result stored: %v", err)
	}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		_, err := tx.Get(ctx, k, nil)
		return err
	})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("write of an input-required call kept: %v", err)
	}
	req.Params.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}
	res, _, err = h(ctx, req, Note{Text: "x"})
	if err != nil || (res != nil && res.IsError) {
		t.Fatalf("retry: %v", err)
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2", runs)
	}
	if _, err := idem.LookupOp(ctx, s, "", "add", "op-mrtr"); err != nil {
		t.Fatalf("completed call not stored: %v", err)
	}
}
