package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
)

// listed returns the tools as tools/list sends them, read through an
// in-process client.
func listed(t *testing.T, h *harness) extest.Tools {
	t.Helper()
	res, err := h.connect().ListTools(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return extest.ListedTools(t, res.Tools)
}

// TestSchemaStatesLimits reads tools/list as a client does: every range,
// list of values and time or date format the tools' descriptions state is
// in the input schema too, where a client checks it before calling.
func TestSchemaStatesLimits(t *testing.T) {
	tools := listed(t, newHarness(t, "memory"))
	// Event times: RFC 3339, in the years 2000 to 2099.
	for _, c := range [][2]string{{"start_focus", "started_at"}, {"end_focus", "end_at"}, {"log_session", "started_at"}, {"heartbeat", "at"}} {
		if p := tools.Prop(t, c[0], c[1]); p["format"] != "date-time" {
			t.Errorf("%s %s: format %v, want date-time", c[0], c[1], p["format"])
		}
		tools.Matches(t, c[0], c[1], map[string]bool{
			"2000-01-01T00:00:00Z": true, "2026-03-02T14:05:00+01:00": true, "2099-12-31T23:59:59.5Z": true,
			"1999-12-31T23:59:59Z": false, "2100-01-01T00:00:00Z": false, "0001-01-01T00:00:00Z": false, "9999-12-31T00:00:00Z": false,
			"x2026-03-02T14:05:00Z": false,
		})
	}
	// Dates.
	for _, c := range [][2]string{{"add_steps", "date"}, {"set_steps", "date"}, {"list_sessions", "date"}} {
		if p := tools.Prop(t, c[0], c[1]); p["format"] != "date" {
			t.Errorf("%s %s: format %v, want date", c[0], c[1], p["format"])
		}
	}
	// Ranges.
	for _, c := range []struct {
		tool, arg string
		min, max  float64
	}{
		{"log_session", "minutes", 1, 1440},
		{"add_steps", "steps", 1, 100000},
		{"set_steps", "steps", 0, 200000},
	} {
		if p := tools.Prop(t, c.tool, c.arg); p["type"] != "integer" || p["minimum"] != c.min || p["maximum"] != c.max {
			t.Errorf("%s %s: %v, want an integer from %v to %v", c.tool, c.arg, p, c.min, c.max)
		}
	}
	// The outcomes of a stop.
	if enum := tools.Enum(t, "end_focus", "outcome"); !slices.Equal(enum, []string{"abandoned", "done", "interrupted"}) {
		t.Errorf("end_focus outcome: enum %q, want done, abandoned and interrupted", enum)
	}
}

// TestOutOfRangeRefusedBeforeHandler sends values outside what the schema
// states: each is refused with invalid_arguments, quoting no value, before
// the handler runs.
func TestOutOfRangeRefusedBeforeHandler(t *testing.T) {
	h := newHarness(t, "memory")
	cs := h.connect()
	for _, c := range []struct {
		tool, quoted string
		args         map[string]any
	}{
		{"log_session", "", map[string]any{"log_id": "l1", "started_at": at("07:00"), "minutes": 0}},
		{"log_session", "1441", map[string]any{"log_id": "l1", "started_at": at("07:00"), "minutes": 1441}},
		{"log_session", "1999", map[string]any{"log_id": "l1", "started_at": "1999-12-31T23:00:00Z", "minutes": 5}},
		{"add_steps", "", map[string]any{"date": "2026-03-02", "steps": 0, "op_id": "op-0"}},
		{"add_steps", "100001", map[string]any{"date": "2026-03-02", "steps": 100001, "op_id": "op-1"}},
		{"set_steps", "-77", map[string]any{"device": "phone", "date": "2026-03-02", "steps": -77}},
		{"set_steps", "200001", map[string]any{"device": "phone", "date": "2026-03-02", "steps": 200001}},
		{"start_focus", "2100", map[string]any{"device": "phone", "label": "x", "started_at": "2100-01-01T00:00:00Z"}},
		{"end_focus", "finished", map[string]any{"session_id": "s1", "device": "phone", "outcome": "finished"}},
		{"end_focus", "0001", map[string]any{"session_id": "s1", "device": "phone", "end_at": "0001-01-01T00:00:00Z"}},
		{"heartbeat", "9999", map[string]any{"session_id": "s1", "at": "9999-12-31T00:00:00Z", "note": "x"}},
	} {
		before, _ := h.f.Runs(c.tool)
		res := h.call(cs, c.tool, c.args)
		if codeOf(res) != string(idem.CodeInvalidArguments) {
			t.Errorf("%s %v: code %q (%s), want invalid_arguments", c.tool, c.args, codeOf(res), text(res))
		}
		if c.quoted != "" && strings.Contains(text(res), c.quoted) {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, text(res))
		}
		if after, _ := h.f.Runs(c.tool); after != before {
			t.Errorf("%s %v: the handler ran %d times, want 0", c.tool, c.args, after-before)
		}
	}
}
