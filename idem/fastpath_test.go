package idem

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

type fastInner struct {
	Name string `json:"name"`
	N    int    `json:"n,omitempty"`
}

type fastAll struct {
	Text  string            `json:"text"`
	Count int               `json:"count,omitempty"`
	Ratio float64           `json:"ratio,omitempty"`
	Flag  bool              `json:"flag,omitempty"`
	Tags  []string          `json:"tags,omitempty"`
	Ints  []int             `json:"ints,omitempty"`
	Ptr   *string           `json:"ptr,omitempty"`
	Inner *fastInner        `json:"inner,omitempty"`
	List  []fastInner       `json:"list,omitempty"`
	Extra map[string]string `json:"extra,omitempty"`
	Any   any               `json:"any,omitempty"`
}

// fastCheckSchemas are the schemas FuzzFastCheck compares the fast check
// and the full validator on: inferred from Go types, with the op_id
// property the middleware adds, and written by hand.
func fastCheckSchemas(tb testing.TB) map[string]*inputCheck {
	tb.Helper()
	checks := map[string]*inputCheck{}
	add := func(name string, s *jsonschema.Schema) {
		ic, err := newInputCheck(s)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		checks[name] = ic
	}
	for name, s := range map[string]func() (*jsonschema.Schema, error){
		"all":   func() (*jsonschema.Schema, error) { return jsonschema.For[fastAll](nil) },
		"inner": func() (*jsonschema.Schema, error) { return jsonschema.For[fastInner](nil) },
	} {
		schema, err := s()
		if err != nil {
			tb.Fatal(err)
		}
		schema.Properties[opIDArgument] = &jsonschema.Schema{Type: "string", MinLength: new(1), MaxLength: new(maxOpIDLen), Pattern: "^[!-~]+$"}
		add(name, schema)
	}
	for name, text := range map[string]string{
		"open":    `{"type":"object","properties":{"a":{"type":"string","minLength":3,"maxLength":5},"b":{"type":["null","integer"]}},"required":["a"]}`,
		"nested":  `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false},"l":{"type":"array","items":{"type":"string","pattern":"^[a-c]+$"}}},"additionalProperties":false}`,
		"unknown": `{"type":"object","properties":{"a":{"type":"string","format":"email"},"b":{"type":"string"}}}`,
		"bool":    `{"type":"object","properties":{"a":true,"f":false}}`,
	} {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			tb.Fatal(err)
		}
		add(name, &s)
	}
	return checks
}

// FuzzFastCheck: whatever the arguments, the fast check never accepts what
// the full validator refuses, and what it accepts goes to the handler as
// sent.
func FuzzFastCheck(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello","op_id":"op-1"}`,
		`{"text":"hello","count":3,"ratio":1.5,"flag":true,"tags":["a","b"],"ints":[1,2],"ptr":null,"inner":{"name":"x","n":2},"list":[{"name":"y"}],"extra":{"k":"v"},"any":[1,{"z":null}]}`,
		`{"op_id":"op-1"}`,                        // text is required
		`{"text":1}`,                              // a number for a string
		`{"text":"a","count":1.5}`,                // not an integer
		`{"text":"a","count":1e2}`,                // an integer, spelled with an exponent
		`{"text":"a","count":1.0}`,                // a whole number: an integer (TestWholeNumbersAreIntegers)
		`{"text":"a","ratio":1e400}`,              // beyond a double's range
		`{"text":"a","any":1e400}`,                // the same in a value of any type
		`{"text":"a","unknown":1}`,                // closed
		`{"text":"a","text":2}`,                   // the last of duplicates counts
		`{"text":2,"text":"a"}`,                   // the last of duplicates counts
		`{"text":"a","\u0074ext":2}`,              // an escaped duplicate
		`{"text":"a","op_id":"has space"}`,        // pattern
		`{"text":"a","op_id":""}`,                 // minLength
		`{"text":"a","op_id":"\u0041"}`,           // an escape in a constrained string
		`{"text":"a","tags":[1]}`,                 // items
		`{"text":"a","tags":null}`,                // a nil slice
		`{"text":"a","inner":{"n":1}}`,            // nested required
		`{"text":"a","inner":{"name":"x","m":1}}`, // nested closed
		`{"text":"a","list":[{"name":"x"},{}]}`,
		`{"text":"a","extra":{"k":1}}`,
		`{"text":"a","extra":{"k":"v","k":1}}`,
		`{"text":"a","extra":{"\u006b":1}}`,
		`{"a":"éé"}`,    // 4 bytes, 2 code points: below minLength 3
		`{"a":"abcdé"}`, // 6 bytes, 5 code points: within maxLength 5
		`{"a":"abc","b":null}`, `{"a":"abc","b":2.0}`, `{"a":"abc","b":"2"}`,
		`{"o":{"x":1.5},"l":["abc","d"]}`, `{"o":{"x":-0.25},"l":[]}`, `{"o":{}}`,
		`{"o":{"x":1},"l":[""]}`, `{"o":{"x":1},"l":["abd"]}`, // the pattern ^[a-c]+$
		`{"a":"x@y","b":"z"}`, `{"b":"z"}`,
		`{"a":1,"f":1}`, `{"a":[{}]}`,
		` { "text" : "a" , "count" : -0 } `,
		`{"text":"a\u0000b","op_id":"x"}`,
		"{\"text\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	checks := fastCheckSchemas(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		for name, ic := range checks {
			if ic.fast == nil || len(args) == 0 || args[0] != '{' || !json.Valid(args) || !ic.fast.fastValid(args) {
				continue
			}
			if _, refused := ic.checkFull(args); refused != nil {
				t.Fatalf("schema %s: the fast check accepts %s, the full validator refuses it: %s", name, args, refused.Message)
			}
			got, refused := ic.check(args, true)
			if refused != nil || string(got) != string(args) {
				t.Fatalf("schema %s: check gave %s, %v for %s accepted as sent", name, got, refused, args)
			}
		}
	})
}

// The fast check is sure of the arguments a client usually sends for a
// tool whose schema comes from its Go types; without this it could be dead
// code and FuzzFastCheck would still pass.
func TestFastCheckTakesUsualArguments(t *testing.T) {
	checks := fastCheckSchemas(t)
	for _, c := range []struct{ schema, args string }{
		{"all", `{"text":"hello","op_id":"op-1"}`},
		{"all", `{"text":"hello","count":3,"ratio":1.5,"flag":false,"tags":["a","b"],"ints":[1,-2],"ptr":"p","inner":{"name":"x","n":2},"list":[{"name":"y"}],"extra":{"k":"v"},"any":[1,{"z":null}]}`},
		{"all", "{\n  \"text\": \"héllo wörld\",\n  \"tags\": null\n}"},
		{"inner", `{"name":"x"}`},
		{"open", `{"a":"abcd","b":null,"c":{"d":[1]}}`},
		{"nested", `{"o":{"x":1.5},"l":["abc","b"]}`},
		{"bool", `{"a":{"b":[1,"x"]}}`},
	} {
		ic := checks[c.schema]
		if ic.fast == nil {
			t.Fatalf("schema %s has no fast check", c.schema)
		}
		if !json.Valid([]byte(c.args)) || !ic.fast.fastValid([]byte(c.args)) {
			t.Errorf("schema %s: the fast check is not sure of %s", c.schema, c.args)
		}
	}
	if checks["unknown"].fast.fastValid([]byte(`{"a":"x@y"}`)) {
		t.Error("the fast check is sure of a keyword it does not know (format)")
	}
}

// byteRun takes the patterns of one run of a byte range, as the op_id
// property's, and nothing else: the fast check then matches them without the
// regexp, and goes to it for any other.
func TestByteRun(t *testing.T) {
	for _, c := range []struct {
		pattern string
		lo, hi  byte
	}{
		{"^[!-~]+$", '!', '~'},
		{"^[a-c]+$", 'a', 'c'},
		{`\A[ -~]+\z`, ' ', '~'},
		{"[a-c]+", 0, 0},        // not anchored
		{"^[a-c]*$", 0, 0},      // the empty string too
		{"^[a-cx]+$", 0, 0},     // two ranges
		{"^[a-c]+$|x", 0, 0},    // an alternative
		{"(?m)^[a-c]+$", 0, 0},  // line anchors
		{"(?i)^[a-c]+$", 0, 0},  // upper case too
		{`^[\x00-~]+$`, 0, 0},   // control bytes
		{"^[!-\u00ff]+$", 0, 0}, // beyond ASCII
		{"^[", 0, 0},            // not a regexp
	} {
		if lo, hi := byteRun(c.pattern); lo != c.lo || hi != c.hi {
			t.Errorf("byteRun(%q) = %q, %q, want %q, %q", c.pattern, lo, hi, c.lo, c.hi)
		}
	}
}

// Absent and null arguments count as {}: the fast check answers them as the
// full validator does, for schemas that require a property and for those
// that do not.
func TestFastCheckOfAbsentArguments(t *testing.T) {
	checks := fastCheckSchemas(t)
	sure := 0
	for name, ic := range checks {
		for _, args := range []string{"", "null", " null\n", " "} {
			want, wantRefused := ic.checkFull(json.RawMessage(args))
			got, refused := ic.check(json.RawMessage(args), false)
			if (refused == nil) != (wantRefused == nil) || string(got) != string(want) {
				t.Errorf("schema %s, arguments %q: check gave %s, %v; the full validator %s, %v", name, args, got, refused, want, wantRefused)
			}
			if ic.fast != nil && ic.fast.fastValid([]byte("{}")) {
				sure++
			}
		}
	}
	if sure == 0 {
		t.Error("no schema's fast check is sure of {}: the absent arguments' fast path is never taken")
	}
}
