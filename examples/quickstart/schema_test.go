package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/sqlite"
)

// listed returns each tool of the quickstart as tools/list sends it, as
// JSON objects, read through an in-process client.
func listed(t *testing.T, srv *mcp.Server) map[string]map[string]any {
	t.Helper()
	ctx := context.Background()
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = m
	}
	return out
}

// property returns the input schema of argument arg of a listed tool.
func property(t *testing.T, tool map[string]any, arg string) map[string]any {
	t.Helper()
	schema, _ := tool["inputSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[arg].(map[string]any)
	if !ok {
		t.Fatalf("%s: no property %s in %v", tool["name"], arg, schema)
	}
	return p
}

func newTestServer(t *testing.T) (*mcp.Server, idem.Store) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return NewServer(s), s
}

// TestSchemaStatesLimits reads tools/list as a client does: the limits the
// arguments' descriptions state (an amount above zero, a month as
// YYYY-MM) are in the input schema too, where a client checks them before
// calling; and add_expense says it is for apps.
func TestSchemaStatesLimits(t *testing.T) {
	srv, _ := newTestServer(t)
	tools := listed(t, srv)

	if p := property(t, tools["add_expense"], "amount_cents"); p["type"] != "integer" || p["minimum"] != 1.0 {
		t.Errorf("add_expense amount_cents %v, want an integer with minimum 1", p)
	}
	p := property(t, tools["set_budget"], "month")
	pattern, _ := p["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if pattern == "" || err != nil {
		t.Fatalf("set_budget month %v: no pattern that compiles (%v)", p, err)
	}
	for month, want := range map[string]bool{"2026-11": true, "2026-01": true, "1999-12": true,
		"2026-13": false, "2026-00": false, "2026-1": false, "November": false, "2026-11-02": false, "x2026-11": false} {
		if re.MatchString(month) != want {
			t.Errorf("set_budget month pattern %q matches %q: %v, want %v", pattern, month, !want, want)
		}
	}

	add := tools["add_expense"]
	if d, _ := add["description"].(string); !strings.HasPrefix(d, "For apps, not models. ") {
		t.Errorf("add_expense description %q, want it to start with %q", d, "For apps, not models. ")
	}
	if meta, _ := add["_meta"].(map[string]any); meta[idem.MetaCallers] != "apps" {
		t.Errorf("add_expense _meta %v, want %s: apps", add["_meta"], idem.MetaCallers)
	}
}

// TestOutOfRangeRefusedBeforeHandler sends values the schema refuses: each
// is refused with invalid_arguments (the handler's own refusal would be
// not_saved), quotes no value, and writes nothing.
func TestOutOfRangeRefusedBeforeHandler(t *testing.T) {
	srv, s := newTestServer(t)
	ctx := context.Background()
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool, quoted string
		args         map[string]any
	}{
		{"add_expense", "-4242", map[string]any{"amount_cents": -4242, "op_id": "op-neg"}},
		{"add_expense", "", map[string]any{"amount_cents": 0, "op_id": "op-zero"}},
		{"set_budget", "2026-13", map[string]any{"month": "2026-13", "amount_cents": 100}},
		{"set_budget", "Nov", map[string]any{"month": "Nov-2026", "amount_cents": 100}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		b, _ := json.Marshal(res.Content)
		if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) {
			t.Errorf("%s %v: isError %v, code %v (%s); want invalid_arguments", c.tool, c.args, res.IsError, res.Meta[idem.MetaError], b)
		}
		if c.quoted != "" && strings.Contains(string(b), c.quoted) {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, b)
		}
	}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for _, k := range []idem.Key{ledgerKey, {Collection: "budgets", ID: "2026-13"}, {Collection: "budgets", ID: "Nov-2026"}} {
			var raw json.RawMessage
			if _, err := tx.Get(ctx, k, &raw); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("%v after refused calls: %s (%v), want none", k, raw, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
