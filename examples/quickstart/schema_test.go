package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/sqlite"
)

// connectTest serves the quickstart on a fresh store in this process and
// returns an in-process client of it and the store.
func connectTest(t *testing.T) (*mcp.ClientSession, idem.Store) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cs, err := idemtest.Connect(context.Background(), NewServer(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, s
}

// TestSchemaStatesLimits reads tools/list as a client does: the limits the
// arguments' descriptions state (an amount above zero, a month as
// YYYY-MM) are in the input schema too, where a client checks them before
// calling; and add_expense says it is for apps.
func TestSchemaStatesLimits(t *testing.T) {
	cs, _ := connectTest(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	extest.QuickstartSchema(t, extest.ListedTools(t, res.Tools))
}

// TestOutOfRangeRefusedBeforeHandler sends values the schema refuses: each
// is refused with invalid_arguments (the handler's own refusal would be
// not_saved), quotes no value, and writes nothing.
func TestOutOfRangeRefusedBeforeHandler(t *testing.T) {
	cs, s := connectTest(t)
	extest.QuickstartOutOfRange(t, s, ledgerKey, func(tool string, args map[string]any) extest.Answer {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		return answerOf(res)
	})
}
