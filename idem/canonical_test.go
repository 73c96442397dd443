package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzCanonical: whatever appendCanonical takes, it writes what the RFC
// 8785 library writes, and the fingerprint it gives is the one the library
// path gives.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello","op_id":"first-1"}`,
		`{"b":1,"a":[true,false,null,-0,0,-12,123456789012345],"c":{"z":{},"y":[]},"op_id":"x"}`,
		`{"s":"\u003c\u003e\u0026 \u2028\u2029 \ud83d\ude00 é \"\\\/\b\f\n\r\t\u0000\u001f\u007f"}`,
		`{ "a" : 1 , "b" : [ 1 , 2 ] }`,
		`{"n":1234567890123456,"f":1.5,"e":1e2}`,
		`{"n":12345678901234567}`, // beyond a double: written as 12345678901234568
		`{"n":-1234567890123456789012}`,
		`{"a":1,"a":2}`,
		`{"op_id":"x","op_id":"y","k":{"op_id":"nested"}}`,
		`{"\u006fp_id":"escaped","é":1,"z":2}`,
		"{\"a\":\"\xff\"}",
		`{"":1,"op_id":2}`,
		`{"a":"\uDEAD"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		trimmed := bytes.TrimSpace(b)
		if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
			return
		}
		if canon, ok := appendCanonical(nil, trimmed, ""); ok {
			want, err := jcs.Transform(trimmed)
			if err != nil || string(canon) != string(want) {
				t.Fatalf("canonical form of %s:\n%s\nthe library's (%v):\n%s", trimmed, canon, err, want)
			}
		}
		canon, ok := appendCanonical(nil, trimmed, opIDArgument)
		if !ok {
			return
		}
		want, err := canonicalizerFingerprint(trimmed)
		if got := sha256.Sum256(canon); err != nil || got != want {
			t.Fatalf("fingerprint of %s: %x, the library path's %x (%v)", trimmed, got, want, err)
		}
	})
}

// appendCanonical takes the arguments encoding/json writes for the usual
// Go inputs: without this FuzzCanonical could pass with the fast path dead.
func TestCanonicalTakesEncodedArguments(t *testing.T) {
	for _, v := range []any{
		struct {
			Text  string   `json:"text"`
			N     int      `json:"n"`
			Tags  []string `json:"tags"`
			OpID  string   `json:"op_id"`
			Inner struct {
				OK bool `json:"ok"`
			} `json:"inner"`
		}{Text: "<héllo>\n", N: -3, Tags: []string{"a"}, OpID: "x"},
		map[string]any{"b": 1, "a": nil},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := appendCanonical(nil, b, opIDArgument); !ok {
			t.Errorf("appendCanonical does not take %s", b)
		}
	}
}
