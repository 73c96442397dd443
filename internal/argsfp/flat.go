package argsfp

import (
	"bytes"
	"encoding/hex"
	"slices"
)

// ofFlat is [Of] for the arguments most calls send: one JSON object whose
// members are strings, numbers, booleans and null, with no escapes in
// names or strings. Their fingerprint needs no decoding: the members,
// sorted by name and written without white space, are what Of's decoding
// and writing back would give. ok is false for any other input, which Of
// then reads in full (FuzzOfFlat compares the two).
func ofFlat(args []byte) (fp string, ok bool) {
	type member struct{ name, value []byte }
	var members [16]member
	ms := members[:0]
	p := skipWS(args, 0)
	if p >= len(args) || args[p] != '{' {
		return "", false
	}
	p = skipWS(args, p+1)
	if p < len(args) && args[p] == '}' {
		p++
	} else {
		for {
			name, q, ok := plainString(args, p)
			if !ok {
				return "", false
			}
			q = skipWS(args, q)
			if q >= len(args) || args[q] != ':' {
				return "", false
			}
			q = skipWS(args, q+1)
			end, ok := scalar(args, q)
			if !ok {
				return "", false
			}
			ms = append(ms, member{name, args[q:end]})
			q = skipWS(args, end)
			if q >= len(args) {
				return "", false
			}
			if args[q] == '}' {
				p = q + 1
				break
			}
			if args[q] != ',' {
				return "", false
			}
			p = skipWS(args, q+1)
		}
	}
	if skipWS(args, p) != len(args) {
		return "", false
	}
	ms = slices.DeleteFunc(ms, func(m member) bool { return string(m.name) == `"op_id"` })
	// By name, unquoted, as encoding/json sorts a map's keys.
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.name[1:len(a.name)-1], b.name[1:len(b.name)-1]) })
	size := 2
	for i, m := range ms {
		if i > 0 && bytes.Equal(m.name, ms[i-1].name) {
			return "", false // the last of two counts: Of knows which
		}
		size += len(m.name) + len(m.value) + 2
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	for i, m := range ms {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(append(append(buf, m.name...), ':'), m.value...)
	}
	buf = append(buf, '}')
	sum := Sum256(buf)
	return hex.EncodeToString(sum[:]), true
}

func skipWS(b []byte, p int) int {
	for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r') {
		p++
	}
	return p
}

// plainString returns the JSON string at b[p:], quotes included, and the
// position after it, when it holds no escape and nothing encoding/json
// writes escaped (control characters, U+2028, U+2029).
func plainString(b []byte, p int) ([]byte, int, bool) {
	if p >= len(b) || b[p] != '"' {
		return nil, 0, false
	}
	for i := p + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[p : i+1], i + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// scalar returns the end of the plain string, number, true, false or null
// at b[p:].
func scalar(b []byte, p int) (int, bool) {
	if p >= len(b) {
		return 0, false
	}
	switch b[p] {
	case '"':
		_, end, ok := plainString(b, p)
		return end, ok
	case 't':
		return literal(b, p, "true")
	case 'f':
		return literal(b, p, "false")
	case 'n':
		return literal(b, p, "null")
	}
	return number(b, p)
}

func literal(b []byte, p int, word string) (int, bool) {
	if !bytes.HasPrefix(b[p:], []byte(word)) {
		return 0, false
	}
	return p + len(word), true
}

// number returns the end of the JSON number at b[p:].
func number(b []byte, p int) (int, bool) {
	digits := func(p int) int {
		for p < len(b) && b[p] >= '0' && b[p] <= '9' {
			p++
		}
		return p
	}
	if p < len(b) && b[p] == '-' {
		p++
	}
	switch {
	case p < len(b) && b[p] == '0':
		p++
	case p < len(b) && b[p] >= '1' && b[p] <= '9':
		p = digits(p)
	default:
		return 0, false
	}
	if p < len(b) && b[p] == '.' {
		q := digits(p + 1)
		if q == p+1 {
			return 0, false
		}
		p = q
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		q := digits(p)
		if q == p {
			return 0, false
		}
		p = q
	}
	return p, true
}
