package extest

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/idem"
)

// An Answer is a tool call's answer as a client reads it, from any MCP
// library's client.
type Answer struct {
	IsError    bool
	Content    string         // the content blocks, as JSON
	Structured any            // the structured content
	Meta       map[string]any // the answer's _meta
}

// Replayed reports whether a is marked as a replay.
func (a Answer) Replayed() bool { return a.Meta[idem.MetaReplayed] == true }

// Field returns a member of the structured content as JSON (a string as
// is).
func (a Answer) Field(name string) string { return exserve.JSONOf(a.Structured, name) }

// SameReplayed checks that again is first's answer given again: marked as
// a replay, where first is not, with the same structured content.
func SameReplayed(t testing.TB, first, again Answer) {
	t.Helper()
	if first.Replayed() || !again.Replayed() {
		t.Fatalf("replay markers: %v, %v; want false, true", first.Replayed(), again.Replayed())
	}
	if a, b := exserve.JSONOf(first.Structured, ""), exserve.JSONOf(again.Structured, ""); a != b {
		t.Fatalf("answers differ: %s vs %s", a, b)
	}
}

// The checks below are the quickstart's (examples/quickstart), which both
// quickstarts pass, whichever MCP library serves them; call calls one of
// its tools.

// QuickstartSchema checks the quickstart's tools as tools/list lists them:
// the limits the arguments' descriptions state (an amount above zero, a
// month as YYYY-MM) are in the input schema too, where a client checks
// them before calling; and add_expense says it is for apps.
func QuickstartSchema(t *testing.T, tools Tools) {
	t.Helper()
	if p := tools.Prop(t, "add_expense", "amount_cents"); p["type"] != "integer" || p["minimum"] != 1.0 {
		t.Errorf("add_expense amount_cents %v, want an integer with minimum 1", p)
	}
	tools.Matches(t, "set_budget", "month", map[string]bool{"2026-11": true, "2026-01": true, "1999-12": true,
		"2026-13": false, "2026-00": false, "2026-1": false, "November": false, "2026-11-02": false, "x2026-11": false})

	add := tools["add_expense"]
	if d, _ := add["description"].(string); !strings.HasPrefix(d, "For apps, not models. ") {
		t.Errorf("add_expense description %q, want it to start with %q", d, "For apps, not models. ")
	}
	if meta, _ := add["_meta"].(map[string]any); meta[idem.MetaCallers] != "apps" {
		t.Errorf("add_expense _meta %v, want %s: apps", add["_meta"], idem.MetaCallers)
	}
}

// QuickstartOutOfRange sends values the quickstart's schemas refuse: each
// is refused with invalid_arguments (the handler's own refusal would be
// not_saved) and quotes no value; and s holds no ledger (at key ledger)
// and no budget after them.
func QuickstartOutOfRange(t *testing.T, s idem.Store, ledger idem.Key, call func(tool string, args map[string]any) Answer) {
	t.Helper()
	for _, c := range []struct {
		tool, quoted string
		args         map[string]any
	}{
		{"add_expense", "-4242", map[string]any{"amount_cents": -4242, "op_id": "op-neg"}},
		{"add_expense", "", map[string]any{"amount_cents": 0, "op_id": "op-zero"}},
		{"set_budget", "2026-13", map[string]any{"month": "2026-13", "amount_cents": 100}},
		{"set_budget", "Nov", map[string]any{"month": "Nov-2026", "amount_cents": 100}},
	} {
		res := call(c.tool, c.args)
		if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) {
			t.Errorf("%s %v: isError %v, code %v (%s); want invalid_arguments", c.tool, c.args, res.IsError, res.Meta[idem.MetaError], res.Content)
		}
		if c.quoted != "" && strings.Contains(res.Content, c.quoted) {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, res.Content)
		}
	}
	ctx := context.Background()
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for _, k := range []idem.Key{ledger, {Collection: "budgets", ID: "2026-13"}, {Collection: "budgets", ID: "Nov-2026"}} {
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

// QuickstartRepeatAndRestart sends add_expense twice with one op id, where
// call serves each call from a server started anew on the same store (a
// restart): one expense, one total, the same answer each time; a new op
// id is a new expense.
func QuickstartRepeatAndRestart(t *testing.T, call func(args map[string]any) Answer) {
	t.Helper()
	args := map[string]any{"amount_cents": 500, "op_id": "app-op-1"}
	first := call(args)
	for range 2 {
		SameReplayed(t, first, call(args))
	}
	if got := first.Field("total_cents"); got != "500" {
		t.Fatalf("total %s, want 500", got)
	}
	if got := call(map[string]any{"amount_cents": 500, "op_id": "app-op-2"}).Field("total_cents"); got != "1000" {
		t.Fatalf("total after a second expense %s, want 1000", got)
	}
}

// demoIDs are the ids a quickstart's -demo run makes up.
var demoIDs = regexp.MustCompile(`demo-[A-Z2-7]{10}|exp-1-[A-Z2-7]{6}`)

// QuickstartDemo runs the quickstart command at path with -demo in dir
// and returns what it printed, the ids it made up replaced, so that two
// runs print the same; it checks that the output is six steps and a
// summary telling the lost answer, its committed status, the replay and
// the one expense.
func QuickstartDemo(t *testing.T, path, dir string) string {
	t.Helper()
	cmd := exec.Command(path, "-demo")
	cmd.Dir = dir
	out := demoIDs.ReplaceAllStringFunc(Output(t, cmd), func(id string) string { return id[:strings.LastIndexByte(id, '-')] + "-ID" })
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 7 {
		t.Fatalf("%d lines, want 6 steps and a summary:\n%s", len(lines), out)
	}
	for _, want := range []string{"no answer", "status committed", "io.idemkit/replayed=true", "expenses 1, total 1250 cents"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	return out
}
