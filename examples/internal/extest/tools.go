package extest

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
)

// Tools are the tools of a tools/list answer as a client reads them: each
// tool's JSON object, by name.
type Tools map[string]map[string]any

// ListedTools reads tools, the tools of a tools/list answer from any MCP
// library's client, as JSON objects.
func ListedTools(t testing.TB, tools any) Tools {
	t.Helper()
	b, err := json.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	out := Tools{}
	for _, tool := range list {
		name, _ := tool["name"].(string)
		out[name] = tool
	}
	return out
}

// Prop returns the input schema of argument arg of tool; it fails t when
// there is none.
func (ts Tools) Prop(t testing.TB, tool, arg string) map[string]any {
	t.Helper()
	schema, _ := ts[tool]["inputSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[arg].(map[string]any)
	if !ok {
		t.Fatalf("%s: no property %s in %v", tool, arg, schema)
	}
	return p
}

// Matches checks that argument arg of tool has a pattern that compiles,
// and that the pattern matches each of values marked true and none marked
// false.
func (ts Tools) Matches(t testing.TB, tool, arg string, values map[string]bool) {
	t.Helper()
	p := ts.Prop(t, tool, arg)
	pattern, _ := p["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if pattern == "" || err != nil {
		t.Errorf("%s %s: no pattern that compiles: %v (%v)", tool, arg, p, err)
		return
	}
	for v, want := range values {
		if re.MatchString(v) != want {
			t.Errorf("%s %s: pattern %q matches %q: %v, want %v", tool, arg, pattern, v, !want, want)
		}
	}
}

// Enum returns the values the input schema of argument arg of tool lists
// (its enum), sorted.
func (ts Tools) Enum(t testing.TB, tool, arg string) []string {
	t.Helper()
	var enum []string
	raw, _ := json.Marshal(ts.Prop(t, tool, arg)["enum"])
	_ = json.Unmarshal(raw, &enum)
	slices.Sort(enum)
	return enum
}
