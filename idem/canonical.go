package idem

import "unicode/utf8"

// appendCanonical appends to out the RFC 8785 form of the valid JSON object
// b without its top-level member named skip, as jcs.Transform and
// dropMember would write it, in one pass and without allocating beyond out.
// It takes the arguments a handler's Go type gives (what encoding/json
// writes): object names of plain ASCII, integers of at most 15 digits,
// strings with any escape but a surrogate pair. For anything else (another
// number, a name with an escape or a byte beyond ASCII, invalid UTF-8, a
// duplicate name) it reports false, and the caller takes the canonicalizer.
// FuzzCanonical compares the two.
func appendCanonical(out, b []byte, skip string) ([]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' || !utf8.Valid(b) { // invalid UTF-8 anywhere, even in skip's value, is refused
		return out, false
	}
	out, i, ok := canonValue(out, b, i, skip, 0)
	return out, ok && skipSpace(b, i) == len(b)
}

// maxCanonDepth bounds the nesting appendCanonical follows; deeper input
// goes to the canonicalizer, which has its own bound.
const maxCanonDepth = 64

// canonMember is an object member: its name (the bytes between the quotes)
// and where its value starts.
type canonMember struct {
	name  []byte
	value int
}

// canonValue appends the canonical form of the value at b[i], skipping the
// member skip of the object at depth 0, and returns the index past it.
func canonValue(out, b []byte, i int, skip string, depth int) ([]byte, int, bool) {
	if depth > maxCanonDepth {
		return out, i, false
	}
	switch c := b[i]; {
	case c == '{':
		var buf [16]canonMember
		members := buf[:0]
		i = skipSpace(b, i+1)
		for b[i] == '"' {
			end := stringEnd(b, i)
			name := b[i+1 : end]
			for _, c := range name {
				if c == '\\' || c >= utf8.RuneSelf {
					return out, i, false // UTF-16 order, escapes: the canonicalizer's
				}
			}
			i = skipSpace(b, skipSpace(b, end+1)+1) // past ':'
			if depth > 0 || skip == "" || string(name) != skip {
				members = append(members, canonMember{name: name, value: i})
			}
			i = skipSpace(b, valueEnd(b, i))
			if b[i] == '}' {
				break
			}
			i = skipSpace(b, i+1) // past ','
		}
		end := i + 1
		sortMembers(members)
		out = append(out, '{')
		for k, m := range members {
			if k > 0 {
				if string(members[k-1].name) == string(m.name) {
					return out, i, false // a duplicate name
				}
				out = append(out, ',')
			}
			out = append(append(append(out, '"'), m.name...), '"', ':')
			var ok bool
			if out, _, ok = canonValue(out, b, m.value, skip, depth+1); !ok {
				return out, i, false
			}
		}
		return append(out, '}'), end, true
	case c == '[':
		out = append(out, '[')
		i = skipSpace(b, i+1)
		for first := true; b[i] != ']'; first = false {
			if !first {
				out = append(out, ',')
			}
			var ok bool
			if out, i, ok = canonValue(out, b, i, skip, depth+1); !ok {
				return out, i, false
			}
			if i = skipSpace(b, i); b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return append(out, ']'), i + 1, true
	case c == '"':
		end := stringEnd(b, i)
		out, ok := appendCanonString(out, b[i+1:end])
		return out, end + 1, ok
	case c == 't':
		return append(out, "true"...), i + 4, true
	case c == 'f':
		return append(out, "false"...), i + 5, true
	case c == 'n':
		return append(out, "null"...), i + 4, true
	}
	// A number: only an integer of at most 15 digits, which a double holds
	// exactly and ECMAScript writes as its digits ("-0" as "0").
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if n := i - digits; n == 0 || n > 15 || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
		return out, i, false
	}
	if string(b[start:i]) == "-0" {
		return append(out, '0'), i, true
	}
	return append(out, b[start:i]...), i, true
}

// sortMembers sorts members by name, byte order (UTF-16 order for the
// ASCII names it is given).
func sortMembers(m []canonMember) {
	for i := 1; i < len(m); i++ { // insertion sort: objects are small
		for k := i; k > 0 && string(m[k].name) < string(m[k-1].name); k-- {
			m[k], m[k-1] = m[k-1], m[k]
		}
	}
}

// appendCanonString appends the RFC 8785 form of the JSON string whose
// contents (between the quotes) are raw: escapes decoded, and only '"',
// '\\' and control characters escaped again.
func appendCanonString(out, raw []byte) ([]byte, bool) {
	out = append(out, '"')
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			var r rune
			switch e := raw[i+1]; e {
			case 'u':
				v, ok := hex4(raw[i+2 : i+6])
				if !ok || v >= 0xd800 && v <= 0xdfff {
					return out, false // a surrogate pair: the canonicalizer's
				}
				r, i = v, i+6
			case 'b':
				r, i = '\b', i+2
			case 'f':
				r, i = '\f', i+2
			case 'n':
				r, i = '\n', i+2
			case 'r':
				r, i = '\r', i+2
			case 't':
				r, i = '\t', i+2
			default: // '"', '\\', '/'
				r, i = rune(e), i+2
			}
			out = appendCanonRune(out, r)
		case c < utf8.RuneSelf:
			out = appendCanonRune(out, rune(c))
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return out, false
			}
			out = append(out, raw[i:i+size]...)
			i += size
		}
	}
	return append(out, '"'), true
}

func appendCanonRune(out []byte, r rune) []byte {
	const hexDigits = "0123456789abcdef"
	switch r {
	case '"', '\\':
		return append(out, '\\', byte(r))
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	}
	if r < 0x20 {
		return append(out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	}
	return utf8.AppendRune(out, r)
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
