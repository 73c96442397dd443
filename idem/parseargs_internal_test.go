package idem

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseArgs compares parseArgs, which walks the arguments with
// segmentio's tokenizer, with encoding/json's decode into a map: the same
// members, the same values as sent, the last of duplicates, and the same
// answer for what is not a JSON object; and stringOf, segmentio's decoding
// of a string, with encoding/json's.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		`{"text":"hello","op_id":"a-1"}`, `{}`, `null`, `[]`, `"s"`, `{"a":1,"a":{"b":[1,{"c":null}]}}`,
		` { "a" : [ ] , "b" : { } } `, `{"op_\u0069d":"x"}`, `{"é":1}`, "{\"\xff\":1}", `{"a":1}x`, `{"a":}`,
		`{"a":"\ud800"}`, `{"\ud800":1}`, `{"\ud83d\ude00":1,"\ud83d":2}`, `{"a\u0000b":1}`, "{\"\xed\xa0\x80\":1}",
		"{\"\xf0\x9f\x98\x80\":[\"\xff\"]}", `{"a\/b":1,"a/b":2}`, `{"op_id":"a\u00e9\ud800\"\\"}`, "{\"op_id\":\"\xff\"}", `{"a":1e400}`, `{"a":[1,2],"b":true,"c":false,"d":-0.5e-3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		got, ok := parseArgs(args)
		var want map[string]json.RawMessage
		wantOK := json.Unmarshal(args, &want) == nil && want != nil
		if ok != wantOK {
			t.Fatalf("parseArgs(%q): ok %v, encoding/json %v", args, ok, wantOK)
		}
		for name, value := range want {
			if v, ok := got.get(name); !ok || string(v) != string(value) {
				t.Fatalf("parseArgs(%q): member %q is %q, encoding/json %q", args, name, v, value)
			}
			var s string
			isString := json.Unmarshal(value, &s) == nil
			if gs, ok := stringOf(value); ok != isString || gs != s {
				t.Fatalf("stringOf(%q) = %q, %v; encoding/json %q, %v", value, gs, ok, s, isString)
			}
		}
		for _, m := range got {
			if _, ok := want[string(m.name)]; !ok {
				t.Fatalf("parseArgs(%q): member %q, not in encoding/json's", args, m.name)
			}
		}
	})
}

// TestParseArgsDeepNesting: arguments nested deeper than encoding/json
// reads (10,000) are not an object to parseArgs either, so that the call is
// refused before the fast check or the handler sees them; segmentio's Valid
// would take them.
func TestParseArgsDeepNesting(t *testing.T) {
	for _, depth := range []int{9_999, 10_001, 1_000_000} {
		args := []byte(`{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
		var want map[string]json.RawMessage
		wantOK := json.Unmarshal(args, &want) == nil
		if _, ok := parseArgs(args); ok != wantOK {
			t.Errorf("depth %d: parseArgs ok %v, encoding/json %v", depth, ok, wantOK)
		}
	}
}
