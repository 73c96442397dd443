package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzClassify feeds the audit a tool as a server could list it, whatever
// its JSON: the audit must not panic, must give every tool one of its
// classes, and must write a report that is valid JSON.
func FuzzClassify(f *testing.F) {
	f.Add([]byte(`{"name":"add","description":"Add.","inputSchema":{"type":"object","properties":{"op_id":{"type":"string"}}},"annotations":{"idempotentHint":true}}`))
	f.Add([]byte(`{"name":"r","inputSchema":{"type":"object","properties":{"x":true,"y":{"items":false}}},"annotations":{"readOnlyHint":true,"destructiveHint":true}}`))
	f.Add([]byte(`{"name":"k","inputSchema":{"type":"object","required":["slug"],"properties":{"slug":{"type":"string","description":"the record key"}}},"annotations":{"idempotentHint":"yes"}}`))
	f.Add([]byte(`{"name":"n","inputSchema":[1,2],"outputSchema":null,"annotations":{"readOnlyHint":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var tool rawTool
		if json.Unmarshal(raw, &tool) != nil {
			return
		}
		r := classify(tool)
		if r.Class.words() == "" {
			t.Fatalf("no class for %s", raw)
		}
		rep := newReport(&listing{Tools: []rawTool{tool}}, "stdio", false)
		var buf bytes.Buffer
		if err := rep.writeJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("report is not JSON: %s", buf.Bytes())
		}
		buf.Reset()
		if err := rep.writeText(&buf); err != nil {
			t.Fatal(err)
		}
	})
}
