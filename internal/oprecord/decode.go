package oprecord

import (
	"encoding/json"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// UnmarshalJSON decodes an op record as encoding/json decodes into Record's
// fields, without its reflection or its separate validating scan: a replay
// decodes one on every call. Input the decoder below does not read itself
// (a member name that differs only in case, a name with escapes, a value of
// the wrong type, invalid JSON) goes to encoding/json, so the result and
// whether it fails are encoding/json's on any input (FuzzRecordUnmarshalJSON).
func (r *Record) UnmarshalJSON(data []byte) error {
	saved := *r
	if r.decode(data) {
		return nil
	}
	*r = saved
	type plain Record // encoding/json's reflection, not this method
	return json.Unmarshal(data, (*plain)(r))
}

// decode decodes data into r and reports whether it could; false leaves r
// partly written.
func (r *Record) decode(data []byte) bool {
	d := decoder{b: data}
	d.space()
	if d.literal("null") { // as encoding/json: null changes nothing
		d.space()
		return d.i == len(d.b)
	}
	if !d.consume('{') {
		return false
	}
	d.space()
	if !d.consume('}') {
		for {
			d.space()
			name, ok := d.name()
			if !ok {
				return false
			}
			d.space()
			if !d.consume(':') {
				return false
			}
			d.space()
			switch m := member(name); {
			case m == nil:
				// encoding/json matches member names without regard to
				// case: such a name is its to decode.
				ok = !foldsToMember(name) && d.skip(0)
			case m.str != nil:
				ok = d.stringInto(m.str(r))
			case m.raw != nil:
				ok = d.rawInto(m.raw(r))
			default:
				ok = d.timeInto(m.time(r))
			}
			if !ok {
				return false
			}
			d.space()
			if d.consume(',') {
				continue
			}
			if d.consume('}') {
				break
			}
			return false
		}
	}
	d.space()
	return d.i == len(d.b)
}

// A recordMember is one of Record's JSON members and the field it decodes
// into: one of str, raw and time.
type recordMember struct {
	name string
	str  func(r *Record) *string
	raw  func(r *Record) *json.RawMessage
	time func(r *Record) *time.Time
}

// members are Record's JSON members.
var members = [...]recordMember{
	{name: "scope", str: func(r *Record) *string { return &r.Scope }},
	{name: "tool", str: func(r *Record) *string { return &r.Tool }},
	{name: "op_id", str: func(r *Record) *string { return &r.OpID }},
	{name: "fingerprint", str: func(r *Record) *string { return &r.Fingerprint }},
	{name: "args_hash", str: func(r *Record) *string { return &r.ArgsHash }},
	{name: "result", raw: func(r *Record) *json.RawMessage { return &r.Result }},
	{name: "output_text", str: func(r *Record) *string { return &r.OutputText }},
	{name: "output", raw: func(r *Record) *json.RawMessage { return &r.Output }},
	{name: "committed_at", time: func(r *Record) *time.Time { return &r.CommittedAt }},
	{name: "expires_at", time: func(r *Record) *time.Time { return &r.ExpiresAt }},
	{name: "attempt", str: func(r *Record) *string { return &r.Attempt }},
}

// member returns the member named exactly name, or nil.
func member(name []byte) *recordMember {
	for i := range members {
		if string(name) == members[i].name {
			return &members[i]
		}
	}
	return nil
}

// foldsToMember reports whether the ASCII name equals a member's name but
// for the case of its letters.
func foldsToMember(name []byte) bool {
	for _, f := range members {
		m := f.name
		if len(m) != len(name) {
			continue
		}
		same := true
		for i := range len(m) {
			c := name[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != m[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// decoder reads one JSON text, validating what it reads as encoding/json's
// scanner does. Each method reports false on anything it does not read
// itself, which sends the whole text to encoding/json.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) consume(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *decoder) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// name reads a member name of printable ASCII without escapes, the quotes
// excluded; others are encoding/json's to match.
func (d *decoder) name() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// stringInto decodes a string into dst; null leaves dst as it is.
func (d *decoder) stringInto(dst *string) bool {
	if d.literal("null") {
		return true
	}
	s, ok := d.str()
	if ok {
		*dst = s
	}
	return ok
}

// rawInto copies the next value, as json.RawMessage does.
func (d *decoder) rawInto(dst *json.RawMessage) bool {
	start := d.i
	if !d.skip(0) {
		return false
	}
	*dst = append((*dst)[:0], d.b[start:d.i]...)
	return true
}

// timeInto decodes the next value with time.Time's own UnmarshalJSON, as
// encoding/json does.
func (d *decoder) timeInto(dst *time.Time) bool {
	start := d.i
	return d.skip(0) && dst.UnmarshalJSON(d.b[start:d.i]) == nil
}

// str reads a string: its bytes as they are when it holds no escape and is
// valid UTF-8, else decoded as encoding/json decodes strings (invalid UTF-8
// and lone surrogates become U+FFFD).
func (d *decoder) str() (string, bool) {
	if !d.consume('"') {
		return "", false
	}
	start := d.i
	escaped, ascii := false, true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			s := d.b[start : d.i-1]
			if !escaped && (ascii || utf8.Valid(s)) {
				return string(s), true
			}
			return unquote(s), true
		case c == '\\':
			escaped = true
			if !d.escape() {
				return "", false
			}
		case c < 0x20:
			return "", false
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			d.i++
		}
	}
	return "", false
}

// escape checks the escape at d.i (a backslash) and moves past it.
func (d *decoder) escape() bool {
	d.i++
	if d.i >= len(d.b) {
		return false
	}
	switch d.b[d.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.i++
		return true
	case 'u':
		if len(d.b)-d.i < 5 {
			return false
		}
		for _, c := range d.b[d.i+1 : d.i+5] {
			if !isHex(c) {
				return false
			}
		}
		d.i += 5
		return true
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unquote decodes the contents of a checked string token, as encoding/json's
// unquote does.
func unquote(s []byte) string {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if len(s)-r >= 6 && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							b = utf8.AppendRune(b, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr) // invalid UTF-8 as U+FFFD
		}
	}
	return string(b)
}

// hex4 returns the value of the four hex digits that start s, or -1 when
// they are not four hex digits.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// maxDepth bounds the nesting the decoder reads itself; deeper values are
// encoding/json's (which allows 10,000 levels).
const maxDepth = 1000

// skip moves past one value, checking it.
func (d *decoder) skip(depth int) bool {
	if d.i >= len(d.b) || depth > maxDepth {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		d.space()
		if d.consume('}') {
			return true
		}
		for {
			d.space()
			if _, ok := d.str(); !ok {
				return false
			}
			d.space()
			if !d.consume(':') {
				return false
			}
			d.space()
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.consume(',') {
				continue
			}
			return d.consume('}')
		}
	case c == '[':
		d.i++
		d.space()
		if d.consume(']') {
			return true
		}
		for {
			d.space()
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.consume(',') {
				continue
			}
			return d.consume(']')
		}
	case c == '"':
		return d.skipString()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return false
}

// skipString moves past a string without decoding it.
func (d *decoder) skipString() bool {
	d.i++
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return true
		case c == '\\':
			if !d.escape() {
				return false
			}
		case c < 0x20:
			return false
		default:
			d.i++
		}
	}
	return false
}

// number moves past a number in JSON's grammar.
func (d *decoder) number() bool {
	d.consume('-')
	switch {
	case d.consume('0'):
	case d.digits() == 0:
		return false
	}
	if d.consume('.') && d.digits() == 0 {
		return false
	}
	if d.consume('e') || d.consume('E') {
		if !d.consume('+') {
			d.consume('-')
		}
		if d.digits() == 0 {
			return false
		}
	}
	return true
}

func (d *decoder) digits() int {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}
