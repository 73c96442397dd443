package idem

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// BenchmarkInputCheck measures the input validation a wrapped tool does
// before its handler (the work the SDK's typed handlers do for mcp.AddTool),
// for a one-property input: to read the middleware's own cost out of
// BenchmarkMiddleware, subtract it.
func BenchmarkInputCheck(b *testing.B) {
	type note struct {
		Text string `json:"text"`
	}
	s, err := jsonschema.For[note](nil)
	if err != nil {
		b.Fatal(err)
	}
	s.Properties[opIDArgument] = &jsonschema.Schema{Type: "string"}
	ic, err := newInputCheck(s)
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"text":"hello","op_id":"first-1"}`)
	b.ReportAllocs()
	for b.Loop() {
		raw, refused := ic.check(args, true)
		if refused != nil {
			b.Fatal(refused)
		}
		var in note
		if err := json.Unmarshal(raw, &in); err != nil {
			b.Fatal(err)
		}
	}
}

// The published form of a schema keeps its numbers as written and turns
// boolean subschemas under properties into {}.
func TestPublishableKeepsNumbersAndRewritesTrue(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"a":true,"n":{"type":"integer","default":9007199254740993}},"additionalProperties":false}`), &s); err != nil {
		t.Fatal(err)
	}
	m, err := publishable(&s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if got, want := string(b), `{"additionalProperties":false,"properties":{"a":{},"n":{"default":9007199254740993,"type":"integer"}},"type":"object"}`; got != want {
		t.Errorf("published\n%s\nwant\n%s", got, want)
	}
}
