package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestClassify checks each rule of docs/protect.md (idem audit) on tools as a server
// sends them.
func TestClassify(t *testing.T) {
	const obj = `{"type":"object"}`
	for _, c := range []struct {
		name  string
		tool  string // a tools/list entry, as JSON
		class class
		codes []string
		opID  string
		keys  []string
	}{
		{"no annotations", `{"name":"x","description":"Add a row.","inputSchema":` + obj + `}`,
			classUnknown, []string{"no_hints", "description_silent"}, "", nil},
		{"annotations with a title only", `{"name":"x","description":"Add a row; not safe to retry.","inputSchema":` + obj + `,"annotations":{"title":"X"}}`,
			classUnknown, []string{"no_hints"}, "", nil},
		{"all hints false", `{"name":"x","description":"Add a row; do not retry.","inputSchema":` + obj + `,"annotations":{"readOnlyHint":false,"idempotentHint":false}}`,
			classNonIdempotent, []string{"not_idempotent"}, "", nil},
		{"destructive, idempotentHint absent", `{"name":"x","description":"Delete rows; a repeat deletes again.","inputSchema":` + obj + `,"annotations":{"destructiveHint":true}}`,
			classNonIdempotent, []string{"no_idempotent_hint"}, "", nil},
		{"destructive, idempotentHint false", `{"name":"x","description":"Delete rows; a repeat deletes again.","inputSchema":` + obj + `,"annotations":{"destructiveHint":true,"idempotentHint":false}}`,
			classNonIdempotent, []string{"not_idempotent"}, "", nil},
		{"read-only", `{"name":"x","description":"Read.","inputSchema":` + obj + `,"annotations":{"readOnlyHint":true}}`,
			classReadOnly, nil, "", nil},
		{"read-only with idempotentHint false (the spec: meaningful only for writes)", `{"name":"x","description":"Read.","inputSchema":` + obj + `,"annotations":{"readOnlyHint":true,"idempotentHint":false}}`,
			classReadOnly, nil, "", nil},
		{"read-only and destructive", `{"name":"x","description":"Read.","inputSchema":` + obj + `,"annotations":{"readOnlyHint":true,"destructiveHint":true}}`,
			classConflicting, []string{"read_only_destructive"}, "", nil},
		{"read-only, destructive false", `{"name":"x","description":"Read.","inputSchema":` + obj + `,"annotations":{"readOnlyHint":true,"destructiveHint":false}}`,
			classReadOnly, nil, "", nil},
		{"idempotent, required op_id", `{"name":"x","description":"Add; send an op_id.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}},"required":["op_id"]}}`,
			classIdempotent, []string{"op_id_only"}, "required", nil},
		{"idempotent, required op_id, declared for apps", `{"name":"x","description":"For apps, not models. Add; send an op_id.","annotations":{"idempotentHint":true},
			"_meta":{"io.idemkit/callers":"apps"},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}},"required":["op_id"]}}`,
			classIdempotent, []string{"op_id_only_for_apps"}, "required", nil},
		{"idempotent, required op_id, _meta naming other callers", `{"name":"x","description":"Add; send an op_id.","annotations":{"idempotentHint":true},
			"_meta":{"io.idemkit/callers":"models"},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}},"required":["op_id"]}}`,
			classIdempotent, []string{"op_id_only"}, "required", nil},
		{"idempotent, required op_id and a record key", `{"name":"x","description":"Add; send an op_id.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"},"day":{"type":"string","description":"Record key: the day"}},"required":["op_id","day"]}}`,
			classIdempotent, nil, "required", []string{"day"}},
		{"not idempotent, required op_id", `{"name":"x","description":"Add; send an op_id.","annotations":{"idempotentHint":false},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}},"required":["op_id"]}}`,
			classNonIdempotent, []string{"not_idempotent", "op_id_only"}, "required", nil},
		{"read-only, required op_id", `{"name":"x","description":"Look up an operation.","annotations":{"readOnlyHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}},"required":["op_id"]}}`,
			classReadOnly, nil, "required", nil},
		{"idempotent, optional op_id, no key", `{"name":"x","description":"Add; send an op_id.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"},"text":{"type":"string"}},"required":["text"]}}`,
			classConflicting, []string{"optional_op_id"}, "optional", nil},
		{"idempotent, optional idempotencyKey", `{"name":"x","description":"Add; send an idempotency key.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"idempotencyKey":{"type":"string"}}}}`,
			classConflicting, []string{"optional_op_id"}, "optional", nil},
		{"idempotent, optional property described as an op id", `{"name":"x","description":"Add; retries are safe with a token.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"token":{"type":"string","description":"Idempotency key for apps"}}}}`,
			classConflicting, []string{"optional_op_id"}, "optional", nil},
		{"idempotent, optional op_id and a record key", `{"name":"x","description":"Put a record; safe to retry.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"},"slug":{"type":"string","description":"Record key: names the record"}},"required":["slug"]}}`,
			classIdempotent, nil, "optional", []string{"slug"}},
		{"a key that is not required is no key", `{"name":"x","description":"Put a record; safe to retry.","annotations":{"idempotentHint":true},
			"inputSchema":{"type":"object","properties":{"op_id":{"type":"string"},"slug":{"type":"string","description":"Record key"}}}}`,
			classConflicting, []string{"optional_op_id"}, "optional", nil},
		{"idempotent without op id or key", `{"name":"x","description":"Set the status.","annotations":{"idempotentHint":true},"inputSchema":` + obj + `}`,
			classIdempotent, []string{"description_silent"}, "", nil},
		{"hint not a boolean", `{"name":"x","description":"Set; retry freely.","annotations":{"idempotentHint":"true"},"inputSchema":` + obj + `}`,
			classUnknown, []string{"bad_annotation", "no_hints"}, "", nil},
		{"no input schema", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true}}`,
			classReadOnly, []string{"schema_root"}, "", nil},
		{"input schema not an object", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true},"inputSchema":true}`,
			classReadOnly, []string{"schema_root"}, "", nil},
		{"input schema root without type object", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true},"inputSchema":{"properties":{}}}`,
			classReadOnly, []string{"schema_root"}, "", nil},
		{"output schema of another type", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true},"inputSchema":` + obj + `,"outputSchema":{"type":"array"}}`,
			classReadOnly, []string{"schema_root"}, "", nil},
		{"additionalProperties false and true are fine", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true},
			"inputSchema":{"type":"object","additionalProperties":false,"properties":{"m":{"type":"object","additionalProperties":true}}},
			"outputSchema":{"type":"object","unevaluatedProperties":false}}`,
			classReadOnly, nil, "", nil},
		{"boolean subschemas deep in input and output", `{"name":"x","description":"Read.","annotations":{"readOnlyHint":true},
			"inputSchema":{"type":"object","properties":{"a":{"type":"array","items":true},"b":{"anyOf":[{"type":"string"},false]}},"$defs":{"d":true}},
			"outputSchema":{"type":"object","properties":{"r":true},"additionalProperties":{"not":true}}}`,
			classReadOnly, []string{"boolean_subschema", "boolean_subschema", "boolean_subschema", "boolean_subschema", "boolean_subschema"}, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var raw rawTool
			if err := json.Unmarshal([]byte(c.tool), &raw); err != nil {
				t.Fatal(err)
			}
			r := classify(raw)
			var codes []string
			for _, f := range r.Findings {
				codes = append(codes, f.Code)
			}
			if r.Class != c.class || !slices.Equal(codes, c.codes) || r.OpID != c.opID || !slices.Equal(r.Keys, c.keys) {
				t.Errorf("got %s %v op id %q keys %v\nwant %s %v op id %q keys %v", r.Class, codes, r.OpID, r.Keys, c.class, c.codes, c.opID, c.keys)
			}
		})
	}
}

// TestBooleanSubschemaPaths checks that the paths name where each boolean
// sits, so an author can find it.
func TestBooleanSubschemaPaths(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"type":"array","items":true},"b":{"anyOf":[{"type":"string"},false]}},"$defs":{"d":true},"additionalProperties":false}`), &s); err != nil {
		t.Fatal(err)
	}
	got := booleanSubschemas(s, "inputSchema")
	want := []string{"inputSchema.properties.a.items", "inputSchema.properties.b.anyOf[1]", "inputSchema.$defs.d"}
	if !slices.Equal(got, want) {
		t.Errorf("paths %q, want %q", got, want)
	}
}

// TestExitStatus: problems fail the audit; warnings only with -strict;
// information (an honest idempotentHint: false) never.
func TestExitStatus(t *testing.T) {
	tool := func(s string) rawTool {
		var r rawTool
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	clean := tool(`{"name":"a","description":"Set a; safe to retry.","annotations":{"idempotentHint":true},"inputSchema":{"type":"object"}}`)
	silent := tool(`{"name":"b","description":"Set b.","annotations":{"idempotentHint":true},"inputSchema":{"type":"object"}}`)
	unknown := tool(`{"name":"c","description":"Add a c; do not retry.","inputSchema":{"type":"object"}}`)
	honest := tool(`{"name":"d","description":"Add a d; a repeat adds again.","annotations":{"idempotentHint":false},"inputSchema":{"type":"object"}}`)
	unsaid := tool(`{"name":"e","description":"Add an e; a repeat adds again.","annotations":{"destructiveHint":false},"inputSchema":{"type":"object"}}`)
	for _, c := range []struct {
		name   string
		tools  []rawTool
		strict bool
		want   int
	}{
		{"no tools", nil, true, exitPass},
		{"clean", []rawTool{clean}, true, exitPass},
		{"a warning", []rawTool{clean, silent}, false, exitPass},
		{"a warning, strict", []rawTool{clean, silent}, true, exitFindings},
		{"a problem", []rawTool{clean, unknown}, false, exitFindings},
		{"an honest false", []rawTool{clean, honest}, true, exitPass},
		{"idempotentHint absent", []rawTool{clean, unsaid}, false, exitFindings},
	} {
		r := newReport(&listing{Tools: c.tools}, "stdio", c.strict)
		if r.ExitStatus != c.want {
			t.Errorf("%s: exit status %d, want %d", c.name, r.ExitStatus, c.want)
		}
	}
}

// Every finding of -json names its tool, so that a message read alone says
// which tool it is about.
func TestFindingsNameTheirTool(t *testing.T) {
	var tools []rawTool
	for _, s := range []string{
		`{"name":"a","description":"Add a.","inputSchema":{"type":"object"}}`,
		`{"name":"b","description":"Add b.","annotations":{"idempotentHint":false},"inputSchema":{"type":"object","properties":{"x":true}}}`,
	} {
		var r rawTool
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, r)
	}
	var b strings.Builder
	if err := newReport(&listing{Tools: tools}, "stdio", false).writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools []struct {
			Name     string
			Findings []struct{ Tool, Severity, Code string }
		}
		Infos int
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tr := range got.Tools {
		for _, f := range tr.Findings {
			n++
			if f.Tool != tr.Name {
				t.Errorf("finding %s of tool %s names tool %q", f.Code, tr.Name, f.Tool)
			}
		}
	}
	if n < 4 || got.Infos != 1 {
		t.Errorf("%d findings, %d infos in %s", n, got.Infos, b.String())
	}
}
