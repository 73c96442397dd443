package main

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
)

// TestSchemaStatesLimits reads tools/list as a client does, through the
// guard: a repository's form (owner/name), the lengths of a title and a
// body, and an issue number from 1 are in the input schemas, where a
// client checks them before calling; TestBadInput shows the guard refusing
// a value outside them before the handler runs.
func TestSchemaStatesLimits(t *testing.T) {
	ctx := ctxFor(t)
	h := newHarness(t, options{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tracker-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: h.hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := extest.ListedTools(t, res.Tools)
	for _, tool := range []string{"create_issue", "add_comment", "list_issues"} {
		tools.Matches(t, tool, "repo", map[string]bool{"acme/app": true, "a.b/c-d_e": true, "acme/.github": true, "acme/..x": true, "acme/...": true,
			"a/" + strings.Repeat("b", 100): true, strings.Repeat(".", 100) + "/b": true,
			"acme": false, "acme/app/x": false, "acme/": false, "ac me/app": false, strings.Repeat("a", 101) + "/b": false,
			"../x": false, "./x": false, "acme/..": false, "acme/.": false, "a/." + strings.Repeat("b", 100): false})
	}
	for _, c := range []struct {
		tool, arg, keyword string
		want               float64
	}{
		{"create_issue", "title", "maxLength", 256},
		{"create_issue", "body", "maxLength", 65536},
		{"add_comment", "body", "maxLength", 65536},
		{"add_comment", "number", "minimum", 1},
	} {
		if got := tools.Prop(t, c.tool, c.arg)[c.keyword]; got != c.want {
			t.Errorf("%s %s: %s %v, want %v", c.tool, c.arg, c.keyword, got, c.want)
		}
	}
}

// TestDotSegmentsRefused sends repository names with a "." or ".." owner
// or name, which a server would read as steps in the API's path
// (/repos/../user/issues is /user/issues): each is refused before the
// handler runs, and the tracker receives nothing.
func TestDotSegmentsRefused(t *testing.T) {
	ctx := ctxFor(t)
	h := newHarness(t, options{})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"create_issue", map[string]any{"repo": "acme/..", "title": "x"}},
		{"create_issue", map[string]any{"repo": "./app", "title": "x"}},
		{"add_comment", map[string]any{"repo": "../user", "number": 1, "body": "x"}},
		{"list_issues", map[string]any{"repo": "../user"}},
	} {
		res, err := h.call(ctx, c.tool, c.args)
		if err == nil && !res.IsError {
			t.Errorf("%s %v: answered %v, want a refusal", c.tool, c.args, textOf(res))
		}
		if err == nil && c.tool != "list_issues" && codeOf(res) != "invalid_arguments" {
			t.Errorf("%s %v: code %q (%v), want invalid_arguments", c.tool, c.args, codeOf(res), textOf(res))
		}
	}
	if got := h.fake.received(); got != (counts{}) {
		t.Errorf("the tracker received %+v, want nothing", got)
	}
}
