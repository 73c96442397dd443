package idem_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// windowStore is a memory store whose Read runs a hook after it answered:
// the window between the middleware's Read and its transaction.
type windowStore struct {
	*memory.Store
	afterRead func()
}

func (w *windowStore) Read(ctx context.Context, k idem.Key, dst any) (idem.Version, error) {
	v, err := w.Store.Read(ctx, k, dst)
	if f := w.afterRead; f != nil {
		w.afterRead = nil
		f()
	}
	return v, err
}

type stopArgs struct {
	Session string `json:"session"`
}

// Two handlers (two processes) on one store. B's Read misses; A commits the
// same op; B's handler then finds the session stopped and refuses. B must
// answer A's stored result, not its own refusal.
func TestDuplicateCommittedAfterReadIsReplayed(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	s := &windowStore{Store: mem}
	sk := idem.Key{Collection: "sessions", ID: "s1"}
	if err := mem.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Put(ctx, sk, map[string]string{"state": "running"})
	}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	stop := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in stopArgs) (*mcp.CallToolResult, any, error) {
		runs++
		var doc map[string]string
		v, err := tx.Get(ctx, sk, &doc)
		if err != nil {
			return nil, nil, err
		}
		if doc["state"] != "running" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no running session"}}}, nil, nil
		}
		if err := tx.Update(ctx, sk, v, map[string]string{"state": "stopped"}); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stopped"}}}, nil, nil
	}
	hA, hB := idem.Tool(s, stop, idem.OpID()), idem.Tool(s, stop, idem.OpID())
	req := func() *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "stop", Arguments: json.RawMessage(`{"session":"s1","op_id":"op-1"}`)}}
	}
	s.afterRead = func() {
		if res, _, err := hA(ctx, req(), stopArgs{Session: "s1"}); err != nil || res.IsError {
			t.Fatalf("A: %v %+v", err, res)
		}
	}
	resB, _, err := hB(ctx, req(), stopArgs{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if resB.IsError || resB.Meta[idem.MetaReplayed] != true || mustJSON(resB.Content) != `[{"type":"text","text":"stopped"}]` {
		t.Errorf("B answered %s, want A's stored result, replayed", mustJSON(resB))
	}
}
