package idem

// A hand-written fast path for the library call every tool call makes: the
// argument check (jsonschema-go). It takes only the inputs it is sure of,
// the usual ones, and answers exactly as the library would; everything
// else goes to the library. FuzzFastCheck compares the two. On PostgreSQL
// it buys about 8% of a first call and 10% of a replay (BenchmarkSuite/calls,
// three paired rounds with and without it in one run). The other JSON
// the middleware reads and writes for itself (the argument members, the op
// record) is segmentio's, the go-sdk's own JSON library.

import (
	"encoding/json"
	"regexp"
	"regexp/syntax"

	"github.com/google/jsonschema-go/jsonschema"
)

// fastSchema is a subschema of the few keywords the schemas inferred from Go
// types use (type, properties, required, additionalProperties, items,
// minLength, maxLength, pattern). fastValid checks arguments against it
// straight from their JSON text, without decoding them into a map: the full
// validator costs about 40 allocations a call, this none. It answers only
// "valid, certainly" or "not sure": every refusal, and every input it is
// not sure of, goes to the full validator, so it can never accept what the
// full validator refuses (FuzzFastCheck compares the two).
type fastSchema struct {
	supported bool      // false: a keyword outside the list above; never sure
	types     jsonTypes // 0: any type
	props     map[string]*fastSchema
	bit       map[string]uint64 // each property's bit, for required
	required  uint64            // the bits of the required properties
	closed    bool              // additionalProperties: false
	more      *fastSchema       // additionalProperties as a schema; nil: any
	items     *fastSchema       // nil: any items
	minLen    int
	maxLen    int // -1: none
	pattern   *regexp.Regexp
	// lo and hi, when lo is not 0, are what pattern says in the form
	// ^[lo-hi]+$ (the op_id property's), checked without the regexp.
	lo, hi byte
}

type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeInteger // the JSON Schema "integer": a number with no fraction
	typeNumber
	typeString
	typeArray
	typeObject
)

var typeBits = map[string]jsonTypes{"null": typeNull, "boolean": typeBoolean, "integer": typeInteger,
	"number": typeNumber | typeInteger, "string": typeString, "array": typeArray, "object": typeObject}

// anySchema accepts every value.
var anySchema = &fastSchema{supported: true, maxLen: -1}

// newFastSchema compiles s, or returns nil when the fast check could never be
// sure of it (so that a tool with such a schema does not try it on every
// call).
func newFastSchema(s *jsonschema.Schema) *fastSchema {
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	fs := compileFast(v)
	if !fs.supported || fs.types != typeObject {
		return nil
	}
	return fs
}

// compileFast compiles one subschema in its JSON form.
func compileFast(v any) *fastSchema {
	unsupported := &fastSchema{}
	if b, ok := v.(bool); ok {
		if b {
			return anySchema
		}
		return unsupported
	}
	m, ok := v.(map[string]any)
	if !ok {
		return unsupported
	}
	fs := &fastSchema{supported: true, maxLen: -1}
	for k, val := range m {
		if !fs.compileKeyword(k, val) {
			return unsupported
		}
	}
	if req, ok := m["required"]; ok && !fs.compileRequired(req) {
		return unsupported
	}
	return fs
}

// compileKeyword compiles keyword k of value val into fs, and reports
// whether the fast check supports it.
func (fs *fastSchema) compileKeyword(k string, val any) bool {
	switch k {
	case "description", "title", "required": // required: compileRequired, once properties are known
		return true
	case "type":
		fs.types = compileTypes(val)
		return fs.types != 0
	case "properties":
		props, ok := val.(map[string]any)
		if !ok || len(props) > 64 {
			return false
		}
		fs.props = make(map[string]*fastSchema, len(props))
		fs.bit = make(map[string]uint64, len(props))
		for name, p := range props {
			fs.props[name] = compileFast(p)
			fs.bit[name] = 1 << len(fs.bit)
		}
		return true
	case "additionalProperties":
		if val == false {
			fs.closed = true
			return true
		}
		fs.more = compileFast(val)
		return fs.more.supported
	case "items":
		fs.items = compileFast(val)
		return fs.items.supported
	case "minLength", "maxLength":
		n, ok := val.(float64)
		if !ok || n < 0 || n != float64(int(n)) {
			return false
		}
		if k == "minLength" {
			fs.minLen = int(n)
		} else {
			fs.maxLen = int(n)
		}
		return true
	case "pattern":
		p, ok := val.(string)
		if !ok {
			return false
		}
		re, err := regexp.Compile(p) // as the full validator compiles it
		if err != nil {
			return false
		}
		fs.pattern = re
		fs.lo, fs.hi = byteRun(p)
		return true
	}
	return false
}

// compileTypes returns the types a "type" keyword of value val names, or 0
// for one the fast check does not know.
func compileTypes(val any) jsonTypes {
	var names []any
	switch t := val.(type) {
	case string:
		names = []any{t}
	case []any:
		names = t
	}
	var types jsonTypes
	for _, e := range names {
		name, _ := e.(string)
		bit := typeBits[name]
		if bit == 0 {
			return 0
		}
		types |= bit
	}
	return types
}

// compileRequired sets the bits of the required properties, and reports
// false for a list the fast check leaves to the full validator.
func (fs *fastSchema) compileRequired(req any) bool {
	list, ok := req.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		name, _ := e.(string)
		bit, known := fs.bit[name]
		if !known {
			return false // required but not a property: leave it to the full validator
		}
		fs.required |= bit
	}
	return true
}

// fastValid reports whether the JSON text b, which must be valid JSON,
// certainly matches fs. False means "not sure", not "invalid".
func (fs *fastSchema) fastValid(b []byte) bool {
	end, ok := fs.value(b, skipSpace(b, 0))
	return ok && skipSpace(b, end) == len(b)
}

// maxNumberLen bounds the numbers the fast check reads: a number without an
// exponent and at most this long is within a double's range, which the full
// validator's decoding requires.
const maxNumberLen = 300

// value checks the value starting at b[i] and returns the index just past
// it.
func (fs *fastSchema) value(b []byte, i int) (int, bool) {
	if !fs.supported || i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		if !fs.allows(typeObject) {
			return i, false
		}
		return fs.object(b, i)
	case c == '[':
		if !fs.allows(typeArray) {
			return i, false
		}
		items := fs.items
		if items == nil {
			items = anySchema
		}
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, true
		}
		for {
			end, ok := items.value(b, i)
			if !ok {
				return i, false
			}
			i = skipSpace(b, end)
			if b[i] == ']' {
				return i + 1, true
			}
			i = skipSpace(b, i+1) // past ','
		}
	case c == '"':
		if !fs.allows(typeString) {
			return i, false
		}
		end := stringEnd(b, i)
		return end + 1, fs.stringOK(b[i+1 : end])
	case c == 't' || c == 'f':
		n := 4
		if c == 'f' {
			n = 5
		}
		return i + n, fs.allows(typeBoolean)
	case c == 'n':
		return i + 4, fs.allows(typeNull)
	default:
		return fs.number(b, i)
	}
}

func (fs *fastSchema) allows(t jsonTypes) bool { return fs.types == 0 || fs.types&t != 0 }

// stringOK checks the raw contents s of a JSON string against the string
// keywords. With any of them it is sure only of printable ASCII without
// escapes, where the decoded string is s and its length in code points is
// len(s).
func (fs *fastSchema) stringOK(s []byte) bool {
	if fs.minLen == 0 && fs.maxLen < 0 && fs.pattern == nil {
		return true
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return len(s) >= fs.minLen && (fs.maxLen < 0 || len(s) <= fs.maxLen) && fs.matches(s)
}

// matches reports whether s, printable ASCII, matches the pattern, if any.
func (fs *fastSchema) matches(s []byte) bool {
	switch {
	case fs.pattern == nil:
		return true
	case fs.lo != 0:
		// For a UUID op id (its pattern is ^[!-~]+$) the regexp takes
		// 0.9 µs, this 60 ns: 5% of a replay's CPU on SQLite
		// (BenchmarkMiddleware/sqlite/wrapped-replay with a UUID op id,
		// twelve paired rounds).
		for _, c := range s {
			if c < fs.lo || c > fs.hi {
				return false
			}
		}
		return len(s) > 0
	}
	return fs.pattern.Match(s)
}

// byteRun returns lo and hi when the regular expression p matches exactly
// the non-empty strings of the bytes lo to hi, both printable ASCII (p is
// ^[lo-hi]+$, or a pattern that means the same), and 0, 0 otherwise.
func byteRun(p string) (lo, hi byte) {
	re, err := syntax.Parse(p, syntax.Perl) // as regexp.Compile parses it
	if err != nil {
		return 0, 0
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) != 3 || re.Sub[0].Op != syntax.OpBeginText || re.Sub[2].Op != syntax.OpEndText {
		return 0, 0
	}
	plus := re.Sub[1]
	if plus.Op != syntax.OpPlus || plus.Sub[0].Op != syntax.OpCharClass || len(plus.Sub[0].Rune) != 2 {
		return 0, 0
	}
	r := plus.Sub[0].Rune
	if r[0] < 0x20 || r[1] > 0x7e || r[0] > r[1] {
		return 0, 0
	}
	return byte(r[0]), byte(r[1])
}

// number checks the number starting at b[i]: sure only of one without an
// exponent, and of an integer only when it has no fraction part.
func (fs *fastSchema) number(b []byte, i int) (int, bool) {
	start, fraction, exponent := i, false, false
	for ; i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] >= '0' && b[i] <= '9'); i++ {
		switch b[i] {
		case '.':
			fraction = true
		case 'e', 'E':
			exponent = true
		}
	}
	if exponent || i == start || i-start > maxNumberLen {
		return i, false
	}
	if fs.types == 0 || fs.types&typeNumber != 0 {
		return i, true
	}
	return i, fs.types&typeInteger != 0 && !fraction
}

// object checks the object starting at b[i]: sure only when no member
// name it must compare has escapes or bytes beyond ASCII and every required
// property is there. Every member's value is checked, so a duplicate
// property, of which the decoder keeps the last, needs no special case.
func (fs *fastSchema) object(b []byte, i int) (int, bool) {
	var seen uint64
	i = skipSpace(b, i+1)
	for b[i] == '"' {
		end := stringEnd(b, i)
		name := b[i+1 : end]
		sub := anySchema
		if fs.props != nil || fs.closed || fs.more != nil {
			for _, c := range name {
				if c == '\\' || c >= 0x80 {
					return i, false
				}
			}
			if p, ok := fs.props[string(name)]; ok {
				seen |= fs.bit[string(name)]
				sub = p
			} else if fs.closed {
				return i, false
			} else if fs.more != nil {
				sub = fs.more
			}
		}
		i = skipSpace(b, skipSpace(b, end+1)+1) // past ':'
		vend, ok := sub.value(b, i)
		if !ok {
			return i, false
		}
		i = skipSpace(b, vend)
		if b[i] == '}' {
			break
		}
		i = skipSpace(b, i+1) // past ','
	}
	return i + 1, seen&fs.required == fs.required
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	var v rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, len(b) == 4
}

// skipSpace returns the index of the first byte at or after i in the valid
// JSON text b that is not white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote that closes the string opening
// at i in the valid JSON text b.
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i
}
