package argsfp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"unicode/utf8"
)

func TestOf(t *testing.T) {
	same := [][]string{
		{`{"a":1,"b":"x"}`, `{ "b" : "x", "a" : 1 }`, `{"b":"x","a":1,"op_id":"k"}`, `{"a":0,"a":1,"b":"x"}`},
		{``, `null`, `{}`, ` {} `, `{"op_id":"k"}`},
		{`{"n":{"z":[1,{"y":true,"x":null}],"a":"<&>"}}`, `{"n":{"a":"<&>","z":[1,{"x":null,"y":true}]}}`},
		{`{"nested":{"op_id":"kept"}}`, `{"op_id":"gone","nested":{"op_id":"kept"}}`},
	}
	seen := map[string]int{}
	for i, group := range same {
		var first string
		for _, in := range group {
			fp, err := Of([]byte(in))
			if err != nil {
				t.Fatalf("%q: %v", in, err)
			}
			if first == "" {
				first = fp
			} else if fp != first {
				t.Errorf("%q: fingerprint differs from %q's", in, group[0])
			}
		}
		if j, ok := seen[first]; ok {
			t.Errorf("groups %d and %d share a fingerprint", j, i)
		}
		seen[first] = i
	}
	differ := [][2]string{
		{`{"n":2}`, `{"n":2.0}`},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`},
		{`{"s":"a"}`, `{"s":"A"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":null}`, `{}`},
	}
	for _, d := range differ {
		a, _ := Of([]byte(d[0]))
		b, _ := Of([]byte(d[1]))
		if a == b {
			t.Errorf("%s and %s share a fingerprint", d[0], d[1])
		}
	}
}

// For arguments of strings, booleans, null and integers, the bytes hashed
// are the RFC 8785 form, which another implementation can check.
func TestOfIsRFC8785ForPlainValues(t *testing.T) {
	for _, in := range []string{
		`{"title":"Fix the <build> & test","n":42,"ok":true,"none":null}`,
		`{"z":{"b":[1,"two",false],"a":"é"},"a":-7}`,
	} {
		canon, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(canon)
		if fp, _ := Of([]byte(in)); fp != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: not the hash of its RFC 8785 form %s", in, canon)
		}
	}
}

func TestOfRefusesWithoutQuoting(t *testing.T) {
	for _, in := range []string{`[1,2]`, `"secret-string"`, `{"a":`, "{\"a\":\"\xff secret\"}", `{"a":1} {"b":2}`} {
		_, err := Of([]byte(in))
		if err == nil {
			t.Errorf("%q: no error", in)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: error quotes the input: %v", in, err)
		}
	}
}

func TestOfValue(t *testing.T) {
	got, err := OfValue(map[string]any{"b": "x", "a": 1, "op_id": "k"})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Of([]byte(`{"a":1,"b":"x"}`)); got != want {
		t.Errorf("OfValue %s, Of %s", got, want)
	}
	if _, err := OfValue(func() {}); err == nil {
		t.Error("a value JSON cannot hold: no error")
	}
}

// FuzzOf: any object, written again with other member order and spacing,
// keeps its fingerprint; adding a member changes it.
func FuzzOf(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `{"op_id":"k","z":{"y":1.5e3}}`, `{"u":"\u00e9\ud83d\ude00"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fp, err := Of(data)
		if err != nil {
			if len(data) > 8 && strings.Contains(err.Error(), string(data)) {
				t.Fatalf("error echoes the input")
			}
			return
		}
		var v map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil || v == nil {
			return // null or empty: {} to Of, but not a map here
		}
		re, err := json.MarshalIndent(v, "", "   ")
		if err != nil {
			return
		}
		if got, err := Of(re); err != nil || got != fp {
			t.Fatalf("written again, %s has another fingerprint than %s (%v)", re, data, err)
		}
		v["\x00fuzz-extra"] = 1
		changed, _ := json.Marshal(v)
		if got, _ := Of(changed); got == fp {
			t.Fatalf("adding a member kept the fingerprint")
		}
	})
}

// The op_id member is dropped wherever it sits among the top-level
// members, spelled with an escape or not, and only there: a nested "op_id"
// key, or the text "op_id" inside a string, is part of the arguments.
func TestOfDropsOnlyTopLevelOpID(t *testing.T) {
	fp := func(s string) string {
		t.Helper()
		got, err := Of([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return got
	}
	for _, c := range [][2]string{
		{`{"op_id":"x","z":1}`, `{"z":1}`},
		{`{"a":1,"op\u005fid":"x"}`, `{"a":1}`},
		{`{"a":"\"op_id\":","op_id":{"n":[1,2]},"b":{"op_id":1}}`, `{"a":"\"op_id\":","b":{"op_id":1}}`},
	} {
		if fp(c[0]) != fp(c[1]) {
			t.Errorf("Of(%s) != Of(%s)", c[0], c[1])
		}
	}
	for _, c := range [][2]string{
		{`{"a":{"op_id":1}}`, `{"a":{}}`},
		{`{"a":"op_id","b":1}`, `{"b":1}`},
		{`{"a":["op_id",1]}`, `{"a":[1]}`},
	} {
		if fp(c[0]) == fp(c[1]) {
			t.Errorf("Of(%s) == Of(%s)", c[0], c[1])
		}
	}
}

// ofFlat, where it is sure, gives Of's fingerprint by decoding, for the
// valid UTF-8 Of hands it.
func FuzzOfFlat(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello","op_id":"op-1"}`, `{ "b" : "x", "a" : 1 }`, `{}`, ` { } `, `{"a":0,"a":1}`,
		`{"n":-0.5e+10,"t":true,"f":false,"z":null}`, `{"n":01}`, `{"n":1.}`, `{"n":-}`, `{"s":"a\u00e9"}`,
		`{"s":"<&>"}`, "{\"s\":\"\u2028\"}", `{"a":"x",}`, `{"a":"x"} {}`, `{"a":[1]}`, `{"a":{"b":1}}`,
		`{"a":"x" "b":1}`, `{"a" "x"}`, `{"op_id":1,"a":2}`, `{"é":1,"e":2}`, `{"a":tru}`, `{"a":1e}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		if !utf8.Valid(args) {
			return
		}
		fp, ok := ofFlat(args)
		if !ok {
			return
		}
		want, err := ofDecoded(args)
		if err != nil || fp != want {
			t.Fatalf("%q: ofFlat gave %s, decoding gives %s, %v", args, fp, want, err)
		}
	})
}

// The usual arguments take the flat path: without it FuzzOfFlat could pass
// with ofFlat never sure.
func TestOfFlatTakesUsualArguments(t *testing.T) {
	for _, args := range []string{
		`{"text":"hello","op_id":"op-1"}`,
		`{"owner":"acme","repo":"web","issue_number":42,"body":"Looks good to me <3","draft":false,"milestone":null}`,
		"{\n  \"title\": \"héllo wörld\",\n  \"n\": -1.5e3\n}",
	} {
		if _, ok := ofFlat([]byte(args)); !ok {
			t.Errorf("%s: not taken", args)
		}
	}
}
