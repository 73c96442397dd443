package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/sqlite"
)

// A model that lost an answer and called again: set_budget, keyed by the
// month, moves nothing whatever it regenerates; add_expense, the app-caller
// example, counts the expense twice under a new op id, which is why it is
// declared for apps (idem.ForApps; docs/protect.md, "Check a server: idem audit").
func TestModelRetries(t *testing.T) {
	ctx := context.Background()
	fresh := func(ctx context.Context) (*idemtest.Subject, error) {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return &idemtest.Subject{Server: NewServer(s), State: func(ctx context.Context) (any, error) {
			var l ledger
			var b Budget
			err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
				if _, err := tx.Get(ctx, ledgerKey, &l); err != nil && !errors.Is(err, idem.ErrNotFound) {
					return err
				}
				if _, err := tx.Get(ctx, idem.Key{Collection: "budgets", ID: "2026-11"}, &b); err != nil && !errors.Is(err, idem.ErrNotFound) {
					return err
				}
				return nil
			})
			return map[string]any{"ledger": l, "budget": b}, err
		}}, nil
	}
	budget := &mcp.CallToolParams{Name: "set_budget", Arguments: map[string]any{"month": "2026-11", "amount_cents": 40000}}
	if _, err := idemtest.ModelRetries(ctx, fresh, budget); err != nil {
		t.Errorf("set_budget: %v", err)
	}
	expense := &mcp.CallToolParams{Name: "add_expense", Arguments: map[string]any{"amount_cents": 1250, "op_id": "app-1"}}
	_, err := idemtest.ModelRetries(ctx, fresh, expense)
	if err == nil || !strings.Contains(err.Error(), `"total_cents":2500`) {
		t.Errorf("add_expense under a fresh op id: %v, want the total doubled", err)
	}
}
