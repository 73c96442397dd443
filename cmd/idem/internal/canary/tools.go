package canary

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

type counter struct {
	N int `json:"n"`
}

type statusRecord struct {
	Status string `json:"status"`
}

// A run's documents are owned by the run, so that runs never meet.
func counterKey(run string) idem.Key {
	return idem.Key{Owner: run, Collection: "canary_counter", ID: "counter"}
}
func changesKey(run string) idem.Key {
	return idem.Key{Owner: run, Collection: "canary_status_changes", ID: "changes"}
}
func statusKey(run, item string) idem.Key {
	return idem.Key{Owner: run, Collection: "canary_status", ID: item}
}

// IncrementIn is the input of increment_then_drop.
type IncrementIn struct {
	Note string `json:"note,omitempty" jsonschema:"any text; the canary ignores it"`
}

// IncrementOut is its answer.
type IncrementOut struct {
	Counter int `json:"counter"`
}

// StatusIn is the input of set_status_then_drop.
type StatusIn struct {
	Item   string `json:"item" jsonschema:"the item whose status is set"`
	Status string `json:"status" jsonschema:"the new status"`
}

// StatusOut is its answer.
type StatusOut struct {
	Item    string `json:"item"`
	Status  string `json:"status"`
	Changes int    `json:"changes" jsonschema:"status changes in this run so far"`
}

// LookupIn is the input of lookup.
type LookupIn struct {
	Item string `json:"item,omitempty" jsonschema:"an item whose status to read"`
}

// LookupOut is its answer.
type LookupOut struct {
	Counter int    `json:"counter"`
	Status  string `json:"status,omitempty"`
}

// get reads k into v, leaving v as it is when k holds nothing; it returns
// the version (0 when absent).
func get(ctx context.Context, tx idem.Tx, k idem.Key, v any) (idem.Version, error) {
	ver, err := tx.Get(ctx, k, v)
	if errors.Is(err, idem.ErrNotFound) {
		return 0, nil
	}
	return ver, err
}

// bump adds one to the counter at k.
func bump(ctx context.Context, tx idem.Tx, k idem.Key) (int, error) {
	var n counter
	ver, err := get(ctx, tx, k, &n)
	if err != nil {
		return 0, err
	}
	n.N++
	if ver == 0 {
		return n.N, tx.Create(ctx, k, n)
	}
	return n.N, tx.Update(ctx, k, ver, n)
}

func (c *Server) addTools() {
	idem.AddTool(c.srv, &mcp.Tool{Name: ToolIncrement,
		Description: "Canary: add one to a durable counter. Not safe to repeat: every run adds one. Its first answer in a run is lost after it committed."},
		c.store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in IncrementIn) (*mcp.CallToolResult, IncrementOut, error) {
			run := c.invoked(req, ToolIncrement)
			n, err := bump(ctx, tx, counterKey(run))
			return nil, IncrementOut{Counter: n}, err
		}, idem.OpID())

	idem.AddTool(c.srv, &mcp.Tool{Name: ToolSetStatus,
		Description: "Canary: set an item's status, replacing the one before; it counts the changes. Its first answer in a run is lost after it committed."},
		c.store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in StatusIn) (*mcp.CallToolResult, StatusOut, error) {
			run := c.invoked(req, ToolSetStatus)
			var cur statusRecord
			ver, err := get(ctx, tx, statusKey(run, in.Item), &cur)
			if err != nil {
				return nil, StatusOut{}, err
			}
			var ch counter
			if _, err := get(ctx, tx, changesKey(run), &ch); err != nil {
				return nil, StatusOut{}, err
			}
			out := StatusOut{Item: in.Item, Status: in.Status, Changes: ch.N}
			if ver != 0 && cur.Status == in.Status {
				return nil, out, nil // the same status again: no change
			}
			if err := tx.Put(ctx, statusKey(run, in.Item), statusRecord{Status: in.Status}); err != nil {
				return nil, out, err
			}
			out.Changes, err = bump(ctx, tx, changesKey(run))
			return nil, out, err
		}, idem.RecordKeys("item"))

	idem.AddTool(c.srv, &mcp.Tool{Name: ToolLookup,
		Description: "Canary: read the counter and, given an item, its status. Read-only. Its first answer in a run is lost.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		c.store, func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in LookupIn) (*mcp.CallToolResult, LookupOut, error) {
			run := c.invoked(req, ToolLookup)
			var n counter
			if _, err := get(ctx, tx, counterKey(run), &n); err != nil {
				return nil, LookupOut{}, err
			}
			out := LookupOut{Counter: n.N}
			if in.Item != "" {
				var st statusRecord
				if _, err := get(ctx, tx, statusKey(run, in.Item), &st); err != nil {
					return nil, out, err
				}
				out.Status = st.Status
			}
			return nil, out, nil
		})
}
