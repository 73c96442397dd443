package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// cancellableStore gives fn a context of its own that can be cancelled, as a
// store with per-transaction deadlines would.
type cancellableStore struct{ *memory.Store }

func (s cancellableStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	return s.Store.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		return fn(ctx, tx)
	})
}

type ctxKey struct{}

// A handler's context carries the request's values and the store's, and is
// cancelled, with the request's cause, when the request is; so is a context
// the handler derives from it.
func TestHandlerContextFollowsRequest(t *testing.T) {
	for name, s := range map[string]idem.Store{"memory": memory.New(nil), "cancellable": cancellableStore{memory.New(nil)}} {
		t.Run(name, func(t *testing.T) {
			cause := errors.New("the client went away")
			ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
			defer cancel(nil)
			hooked := false
			h := idem.DirectTool(s, func(hctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, Added, error) {
				if hctx.Value(ctxKey{}) != "v" {
					t.Error("the request's value is missing")
				}
				if !idem.AfterCommit(hctx, func(context.Context) { hooked = true }) {
					t.Error("AfterCommit refused the handler's context")
				}
				child, stop := context.WithCancel(hctx)
				defer stop()
				if hctx.Err() != nil || child.Err() != nil {
					t.Error("cancelled before the request was")
				}
				cancel(cause)
				for _, c := range []context.Context{hctx, child} {
					select {
					case <-c.Done():
					case <-time.After(5 * time.Second):
						t.Fatal("not cancelled with the request")
					}
					if !errors.Is(c.Err(), context.Canceled) || context.Cause(c) != cause {
						t.Errorf("err %v, cause %v; want the request's", c.Err(), context.Cause(c))
					}
				}
				return nil, Added{ID: "x"}, tx.Create(hctx, idem.Key{Collection: "notes", ID: "n"}, in)
			}, idem.OpID())
			res, _, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
				Name: "add_note", Arguments: json.RawMessage(`{"text":"hello","op_id":"op-1"}`)}}, Note{})
			if err != nil || res.IsError {
				t.Fatal(err, res)
			}
			if !hooked {
				t.Error("the hook did not run after the commit")
			}
		})
	}
}
