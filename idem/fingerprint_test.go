package idem_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/idemkit/sdk/idem"
)

func mustFP(t testing.TB, s string) string {
	t.Helper()
	fp, err := idem.Fingerprint(json.RawMessage(s))
	if err != nil {
		t.Fatalf("Fingerprint(%s): %v", s, err)
	}
	return fp
}

func TestFingerprintCanonical(t *testing.T) {
	same := [][]string{
		{`{"a":1,"b":"x"}`, `{"b":"x","a":1}`, " {\n \"b\" : \"x\" ,\t\"a\":1 } "},
		{`{"n":1}`, `{"n":1.0}`, `{"n":1e0}`, `{"n":10E-1}`},
		{`{"n":100}`, `{"n":1E+2}`},
		{`{"s":"A"}`, `{"s":"\u0041"}`},
		{`{"nested":{"y":[1,2],"x":null}}`, `{"nested":{"x":null,"y":[1.0,2]}}`},
		{`{"a":1}`, `{"a":1,"op_id":"abc"}`, `{"op_id":"other","a":1}`},
		{`{}`, ``, `null`, `{"op_id":"x"}`},
	}
	for _, group := range same {
		want := mustFP(t, group[0])
		for _, s := range group[1:] {
			if got := mustFP(t, s); got != want {
				t.Errorf("Fingerprint(%s) != Fingerprint(%s)", s, group[0])
			}
		}
	}
	differ := []string{`{"a":1}`, `{"a":2}`, `{"a":"1"}`, `{"a":[1]}`, `{"b":1}`, `{"a":1,"b":null}`, `{"a":true}`, `{"A":1}`, `{"nested":{"op_id":"x"}}`}
	seen := map[string]string{}
	for _, s := range differ {
		fp := mustFP(t, s)
		if prev, ok := seen[fp]; ok {
			t.Errorf("Fingerprint(%s) == Fingerprint(%s)", s, prev)
		}
		seen[fp] = s
	}
}

func TestFingerprintRejectsNonObjects(t *testing.T) {
	for _, s := range []string{`[1,2]`, `"op_id"`, `42`, `{"a":`, `{"a":1}{`, `{"secret-value":}`} {
		_, err := idem.Fingerprint(json.RawMessage(s))
		if err == nil {
			t.Errorf("Fingerprint(%s): no error", s)
			continue
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("error echoes the input: %v", err)
		}
	}
}

// FuzzFingerprint: any object, re-encoded with other member order and
// spacing, keeps its fingerprint; adding a member changes it.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `{"op_id":"k","z":{"y":1.5e3}}`, `{"u":"\u00e9\ud83d\ude00"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fp, err := idem.Fingerprint(data)
		if err != nil {
			if len(data) > 8 && strings.Contains(err.Error(), string(data)) {
				t.Fatalf("error echoes the input")
			}
			return
		}
		var v map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // keep every number's exact value
		if err := dec.Decode(&v); err != nil || v == nil {
			return // valid for Fingerprint (null, empty) but not a map here
		}
		// Re-encode: encoding/json sorts keys; MarshalIndent changes the
		// spacing.
		re, err := json.MarshalIndent(v, "", "   ")
		if err != nil {
			return
		}
		if got := mustFP(t, string(re)); got != fp {
			t.Fatalf("re-encoded %s has another fingerprint than %s", re, data)
		}
		v["\x00fuzz-extra"] = 1
		changed, _ := json.Marshal(v)
		if mustFP(t, string(changed)) == fp {
			t.Fatalf("adding a member kept the fingerprint")
		}
	})
}

// An op_id spelled with a JSON escape is still the op_id member.
func TestFingerprintEscapedOpID(t *testing.T) {
	if mustFP(t, `{"a":1,"op\u005fid":"x"}`) != mustFP(t, `{"a":1}`) {
		t.Error(`an escaped "op_id" member was fingerprinted`)
	}
}

// Numbers are compared by exact value: ones a double cannot tell apart
// (int64 ids above 2^53, long decimals) still get different fingerprints,
// and spellings of one exact value share one.
func TestFingerprintExactNumbers(t *testing.T) {
	differ := [][2]string{
		{`{"id":9007199254740993}`, `{"id":9007199254740992}`},
		{`{"id":1234567890123456789}`, `{"id":1234567890123456788}`},
		{`{"x":[1,{"amount":0.12345678901234567}]}`, `{"x":[1,{"amount":0.12345678901234566}]}`},
		{`{"id":9007199254740993}`, `{"id":"9007199254740993"}`},
	}
	for _, d := range differ {
		if mustFP(t, d[0]) == mustFP(t, d[1]) {
			t.Errorf("Fingerprint(%s) == Fingerprint(%s)", d[0], d[1])
		}
	}
	same := [][]string{
		{`{"id":9007199254740993}`, `{"id":9007199254740993.0}`, `{"id":90071992547409930e-1}`, `{ "id" : 9.007199254740993E15 }`},
		{`{"a":{"n":12345678901234567891,"m":1},"b":2}`, `{"b":2,"a":{"m":1,"n":12345678901234567891}}`},
	}
	for _, group := range same {
		for _, s := range group[1:] {
			if mustFP(t, s) != mustFP(t, group[0]) {
				t.Errorf("Fingerprint(%s) != Fingerprint(%s)", s, group[0])
			}
		}
	}
	// Without long numbers the fingerprint is the hash of the RFC 8785 form.
	sum := sha256.Sum256([]byte(`{"a":0.5,"b":2,"c":[1e+21,"é"]}`))
	if got := mustFP(t, `{"c":[1E21,"\u00e9"],"b":2.0,"a":5e-1}`); got != hex.EncodeToString(sum[:]) {
		t.Errorf("fingerprint %s is not the SHA-256 of the RFC 8785 form", got)
	}
}

// One value, any spelling, one fingerprint; keys cannot forge the extra
// lines; float64 values Go marshaled hash as plain RFC 8785.
func TestFingerprintNumbersByValue(t *testing.T) {
	same := [][2]string{
		{`{"x":0.1}`, `{"x":0.10000000000000000}`},
		{`{"x":1e-16}`, `{"x":0.0000000000000001}`},
		{`{"x":0.1,"s":"1234567890123456"}`, `{"x":0.1,"s":"123456789012345\u0036"}`},
		{`{"id":9007199254740993}`, `{"id":9007199254740993` + strings.Repeat("0", 401) + `e-401}`},
		{`{"z":-0.0000000000000000}`, `{"z":0}`},
	}
	for _, p := range same {
		if mustFP(t, p[0]) != mustFP(t, p[1]) {
			t.Errorf("one value, two fingerprints:\n  %.80s\n  %.80s", p[0], p[1])
		}
	}
	a := `{"a":9007199254740993,"b":9007199254740993,"a=9007199254740993\u0000":{"b":9007199254740992}}`
	b := `{"a":9007199254740992,"b":9007199254740992,"a=9007199254740993\u0000":{"b":9007199254740993}}`
	if mustFP(t, a) == mustFP(t, b) {
		t.Error("a key forged the exact-number lines")
	}
	type point struct{ Lat, Amount float64 }
	raw, _ := json.Marshal(point{Lat: 37.77492912345678, Amount: 0.1 + 0.2})
	canon, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if got := mustFP(t, string(raw)); got != hex.EncodeToString(sum[:]) {
		t.Errorf("Go-marshaled floats %s: fingerprint is not the plain RFC 8785 hash", raw)
	}
}

// Hostile numbers cost time linear in their length. Measured by the
// benchmark, not asserted as a time.
func BenchmarkFingerprintLongNumbers(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		fraction := `{"x":0.1` + strings.Repeat("7", n) + `e-400}`
		b.Run(fmt.Sprintf("fraction-%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(fraction)))
			for b.Loop() {
				if _, err := idem.Fingerprint(json.RawMessage(fraction)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The op_id member is dropped wherever it sits among the top-level members,
// and only there: a nested "op_id" key, or the text "op_id": inside a
// string, is part of the arguments.
func TestFingerprintDropsOnlyTopLevelOpID(t *testing.T) {
	for _, c := range []struct{ with, without string }{
		{`{"op_id":"x"}`, `{}`},
		{`{"op_id":"x","z":1}`, `{"z":1}`},
		{`{"a":1,"op_id":"x"}`, `{"a":1}`},
		{`{"a":1,"op_id":"x","z":[1,{"b":"}"}]}`, `{"a":1,"z":[1,{"b":"}"}]}`},
		{`{"a":"\"op_id\":","op_id":{"n":[1,2]},"b":{"op_id":1}}`, `{"a":"\"op_id\":","b":{"op_id":1}}`},
		{`{"a":{"op_id":1},"op_id":"x"}`, `{"a":{"op_id":1}}`},
	} {
		if got, want := mustFP(t, c.with), mustFP(t, c.without); got != want {
			t.Errorf("Fingerprint(%s) != Fingerprint(%s)", c.with, c.without)
		}
	}
	for _, c := range [][2]string{
		{`{"a":{"op_id":1}}`, `{"a":{}}`},
		{`{"a":"op_id","b":1}`, `{"b":1}`},
		{`{"a":["op_id",1]}`, `{"a":[1]}`},
	} {
		if mustFP(t, c[0]) == mustFP(t, c[1]) {
			t.Errorf("Fingerprint(%s) == Fingerprint(%s)", c[0], c[1])
		}
	}
}

// Invalid UTF-8 is refused whether or not the arguments hold an op_id.
func TestFingerprintRefusesInvalidUTF8(t *testing.T) {
	for _, s := range []string{"{\"\xff\":1}", "{\"\xff\":1,\"op_id\":\"o\"}", "{\"k\":\"\xfe\",\"op\\u005fid\":\"o\"}"} {
		if _, err := idem.Fingerprint(json.RawMessage(s)); err == nil {
			t.Errorf("Fingerprint(%q): no error", s)
		}
	}
}
