package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/sqlite"
)

// serveTest serves the quickstart on a fresh store over HTTP on loopback,
// in this process, and returns a client of it and the store.
func serveTest(t *testing.T) (*client.Client, idem.Store) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(exserve.DefaultLimits().Endpoint(serving(NewServer(s), slog.New(slog.NewTextHandler(io.Discard, nil))).HTTP, nil))
	t.Cleanup(hs.Close)
	return dial(t, hs.URL+exserve.Path, ""), s
}

// TestSchemaStatesLimits reads tools/list as a client does: the limits the
// arguments' descriptions state (an amount above zero, a month as
// YYYY-MM) are in the input schema too, as in the go-sdk quickstart; and
// add_expense says it is for apps.
func TestSchemaStatesLimits(t *testing.T) {
	cl, _ := serveTest(t)
	res, err := cl.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]map[string]any{}
	for _, tool := range res.Tools {
		var m map[string]any
		if err := json.Unmarshal([]byte(jsonOf(tool, "")), &m); err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = m
	}
	property := func(tool, arg string) map[string]any {
		t.Helper()
		schema, _ := tools[tool]["inputSchema"].(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		p, ok := props[arg].(map[string]any)
		if !ok {
			t.Fatalf("%s: no property %s in %v", tool, arg, schema)
		}
		return p
	}

	if p := property("add_expense", "amount_cents"); p["type"] != "integer" || p["minimum"] != 1.0 {
		t.Errorf("add_expense amount_cents %v, want an integer with minimum 1", p)
	}
	p := property("set_budget", "month")
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
	cl, s := serveTest(t)
	for _, c := range []struct {
		tool, quoted string
		args         map[string]any
	}{
		{"add_expense", "-4242", map[string]any{"amount_cents": -4242, "op_id": "op-neg"}},
		{"add_expense", "", map[string]any{"amount_cents": 0, "op_id": "op-zero"}},
		{"set_budget", "2026-13", map[string]any{"month": "2026-13", "amount_cents": 100}},
		{"set_budget", "Nov", map[string]any{"month": "Nov-2026", "amount_cents": 100}},
	} {
		res, err := cl.CallTool(t.Context(), callOf(c.tool, c.args))
		if err != nil {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		var code any
		if res.Meta != nil {
			code = res.Meta.AdditionalFields[idem.MetaError]
		}
		content := jsonOf(res.Content, "")
		if !res.IsError || code != string(idem.CodeInvalidArguments) {
			t.Errorf("%s %v: isError %v, code %v (%s); want invalid_arguments", c.tool, c.args, res.IsError, code, content)
		}
		if c.quoted != "" && strings.Contains(content, c.quoted) {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, content)
		}
	}
	ctx := context.Background()
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
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
