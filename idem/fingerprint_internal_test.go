package idem

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkFastPath fails t when Fingerprint, which drops a plain op_id from the
// canonical form, disagrees with decoding the arguments to drop it.
func checkFastPath(t *testing.T, data []byte) {
	t.Helper()
	got, err := fingerprintSum(data)
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return
	}
	want, werr := decodedFingerprint(trimmed)
	if got != want || (err == nil) != (werr == nil) {
		t.Fatalf("%q: Fingerprint %x (%v), decoded %x (%v)", data, got, err, want, werr)
	}
}

func TestFingerprintFastPathAgrees(t *testing.T) {
	for _, s := range []string{
		`{"a":1,"a":2,"op_id":"x"}`,            // duplicate member
		`{"n":1,"op_id":12345678901234567890}`, // a long number in op_id
		"{\"op_id\":\"x\",\"k\":\"\xff\"}",     // invalid UTF-8 value
		"{\"\xff\":1,\"op_id\":\"x\"}",         // invalid UTF-8 key
		`{"op_id":"x","s":"\u2028"}`,
		"{\"op_id\":\"x\",\"s\":\"\u2028\"}",
		`{"op_id":"x"} `,
		`{"op_id":"x","a":1e400}`,
		`{"a":"op_id"}`,
	} {
		checkFastPath(t, []byte(s))
	}
	// Random objects with op_id anywhere, nested, inside strings, and
	// keys that look like it.
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "op_id", "op", "op_ie", "Op_id", "z", "é", "😀", "op_id2", "_op_id"}
	values := []string{`1`, `1.0`, `-0`, `"op_id"`, `"\"op_id\":"`, `"}"`, `"\\"`, `"x,y"`, `null`, `true`, `12345678901234567891`, `"a\"op_id"`, `"<&>"`, `"é"`}
	var value func(depth int) string
	object := func(depth int) string {
		var b strings.Builder
		b.WriteByte('{')
		seen := map[string]bool{}
		for range r.IntN(5) {
			k := keys[r.IntN(len(keys))]
			if seen[k] {
				continue
			}
			if len(seen) > 0 {
				b.WriteByte(',')
			}
			seen[k] = true
			b.WriteString(`"` + k + `":` + value(depth+1))
		}
		b.WriteByte('}')
		return b.String()
	}
	value = func(depth int) string {
		switch k := r.IntN(9); {
		case depth > 2 || k < 3:
			return values[r.IntN(len(values))]
		case k < 6:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, value(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		return object(depth)
	}
	for range 20000 {
		checkFastPath(t, []byte(object(0)))
	}
}

func FuzzFingerprintFastPath(f *testing.F) {
	for _, s := range []string{`{"op_id":"k","z":{"op_id":1.5e3}}`, `{"a":"\"op_id\":","op_id":[1,{"b":"}"}]}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			checkFastPath(t, data)
		}
	})
}

// parseArgs agrees with decoding the whole object into a map, for the
// members it is asked for.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{` { "op_id" : "a" , "k":[1, {"}":"]"}] ,"op_id":"b"} `, `{"op\u005fid":"x","k":null}`, `{}`, `[1]`, `{"k":"\\\""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, isObject := parseArgs(data, false, nil, opIDArgument, "k")
		var all map[string]json.RawMessage
		if json.Unmarshal(data, &all) != nil || all == nil {
			if isObject || got.vals != nil {
				t.Fatalf("%q: not an object, but parsed %v", data, got.vals)
			}
			return
		}
		for _, name := range []string{opIDArgument, "k"} {
			g, gok := got.get(name)
			w, wok := all[name]
			if gok != wok || !bytes.Equal(g, w) {
				t.Fatalf("%q: member %s = %q (%v), want %q (%v)", data, name, g, gok, w, wok)
			}
		}
	})
}
