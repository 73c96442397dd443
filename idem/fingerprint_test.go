package idem_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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

// FuzzFingerprint: any object, re-encoded with other member order, spacing
// and number spelling, keeps its fingerprint; adding a member changes it.
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
		if err := dec.Decode(&v); err != nil || v == nil {
			return // valid for Fingerprint (null, empty) but not a map here
		}
		// Re-encode: encoding/json sorts keys and spells numbers its own way;
		// MarshalIndent changes the spacing.
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
