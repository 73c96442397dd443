package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
)

// TestSchemaStatesLimits reads tools/list as a client does: every limit
// the tools' descriptions state, and the handlers check, is in the input
// schema too (a slug's and a handle's form, a note's length, pass or fail,
// a revision from 1), where a client checks it before calling.
func TestSchemaStatesLimits(t *testing.T) {
	e := newEnv(t, "memory")
	res, err := e.connect(t).ListTools(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := extest.ListedTools(t, res.Tools)
	slugs := map[string]bool{"login-loop": true, "a": true, "9lives": true, strings.Repeat("a", 64): true,
		"": false, "-x": false, "Login": false, "a b": false, "a/b": false, strings.Repeat("a", 65): false}
	for _, tool := range []string{"publish_story", "report_reproduction", "edit_story", "report_check", "get_story"} {
		tools.Matches(t, tool, "slug", slugs)
	}
	handles := map[string]bool{"@ben": true, "ben": true, "b.e-n_1": true, "@" + strings.Repeat("b", 64): true,
		"": false, "@": false, "@.ben": false, "ben/x": false, "be n": false, strings.Repeat("b", 65): false}
	for _, tool := range []string{"report_reproduction", "report_check"} {
		tools.Matches(t, tool, "handle", handles)
	}
	for _, c := range []struct {
		tool, arg string
		min, max  any // nil: none
	}{
		{"publish_story", "title", 1.0, float64(maxTitle)},
		{"publish_story", "body", 1.0, float64(maxBody)},
		{"edit_story", "body", 1.0, float64(maxBody)},
		{"report_reproduction", "note", nil, float64(maxNote)},
	} {
		if p := tools.Prop(t, c.tool, c.arg); p["minLength"] != c.min || p["maxLength"] != c.max {
			t.Errorf("%s %s: %v, want minLength %v and maxLength %v", c.tool, c.arg, p, c.min, c.max)
		}
	}
	if p := tools.Prop(t, "report_reproduction", "note"); p["maxLength"] != 280.0 {
		t.Errorf("report_reproduction note: maxLength %v, want 280, as its description says", p["maxLength"])
	}
	if p := tools.Prop(t, "edit_story", "revision"); p["type"] != "integer" || p["minimum"] != 1.0 {
		t.Errorf("edit_story revision: %v, want an integer from 1", p)
	}
	if enum := tools.Enum(t, "report_check", "result"); !slices.Equal(enum, []string{"fail", "pass"}) {
		t.Errorf("report_check result: enum %q, want pass and fail", enum)
	}
}

// TestOutOfRangeRefusedBeforeHandler sends values outside what the schema
// states: each is refused with invalid_arguments, quoting no value, before
// the handler runs.
func TestOutOfRangeRefusedBeforeHandler(t *testing.T) {
	e := newEnv(t, "memory")
	cs := e.connect(t)
	const secret = "SENTINEL-7f3a"
	for _, c := range []write{
		{"publish_story", map[string]any{"slug": "Bad-" + secret, "title": "t", "body": "b"}},
		{"publish_story", map[string]any{"slug": "fine", "title": "", "body": "b"}},
		{"publish_story", map[string]any{"slug": "fine", "title": strings.Repeat(secret, 20), "body": "b"}},
		{"report_reproduction", map[string]any{"slug": "fine", "handle": secret + "/x"}},
		{"report_reproduction", map[string]any{"slug": "fine", "handle": "@a", "note": strings.Repeat(secret, 25)}},
		{"edit_story", map[string]any{"slug": "fine", "revision": 0, "body": secret}},
		{"report_check", map[string]any{"slug": "fine", "handle": "@a", "result": secret}},
		{"get_story", map[string]any{"slug": secret}},
	} {
		before := e.a.ran(c.tool)
		res := call(t, e.ctx, cs, c.tool, c.args)
		if !res.IsError || res.Meta[idem.MetaError] != string(idem.CodeInvalidArguments) {
			t.Errorf("%s %v: isError %v, code %v (%s); want invalid_arguments", c.tool, c.args, res.IsError, res.Meta[idem.MetaError], text(res))
		}
		if strings.Contains(text(res), secret) {
			t.Errorf("%s: the refusal quotes the value: %s", c.tool, text(res))
		}
		if n := e.a.ran(c.tool) - before; n != 0 {
			t.Errorf("%s %v: the handler ran %d times, want 0", c.tool, c.args, n)
		}
	}
}
