package argsfp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// ofFlat is [Of] for the arguments most calls send: one JSON object whose
// members are strings, numbers, booleans and null, with no escapes in
// names or strings. Their fingerprint needs no decoding: the members,
// sorted by name and written without white space, are what Of's decoding
// and writing back would give. ok is false for any other input, which Of
// then reads in full (FuzzOfFlat compares the two).
func ofFlat(args []byte) (fp string, ok bool) {
	if !json.Valid(args) {
		return "", false
	}
	// Valid JSON: what is left to check is the shape, and the strings.
	type member struct{ name, value []byte }
	var members [16]member
	ms := members[:0]
	p := skipWS(args, 0)
	if args[p] != '{' {
		return "", false
	}
	for p = skipWS(args, p+1); args[p] != '}'; p = skipWS(args, p+1) {
		name, end, ok := plainString(args, p)
		if !ok {
			return "", false
		}
		p = skipWS(args, skipWS(args, end)+1) // past the colon
		if end, ok = scalar(args, p); !ok {
			return "", false
		}
		ms = append(ms, member{name, args[p:end]})
		if p = skipWS(args, end); args[p] == '}' {
			break
		}
	}
	ms = slices.DeleteFunc(ms, func(m member) bool { return string(m.name) == `"op_id"` })
	// By name, unquoted, as encoding/json sorts a map's keys.
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.name[1:len(a.name)-1], b.name[1:len(b.name)-1]) })
	buf := make([]byte, 0, len(args))
	buf = append(buf, '{')
	for i, m := range ms {
		if i > 0 && bytes.Equal(m.name, ms[i-1].name) {
			return "", false // the last of two counts: Of knows which
		}
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

// plainString returns the string at b[p:], quotes included, and the
// position after it, when it holds no escape and nothing encoding/json
// writes escaped (control characters, U+2028, U+2029). b is valid JSON.
func plainString(b []byte, p int) ([]byte, int, bool) {
	if b[p] != '"' {
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
// at b[p:], valid JSON; ok is false for an object or an array.
func scalar(b []byte, p int) (end int, ok bool) {
	switch b[p] {
	case '"':
		_, end, ok = plainString(b, p)
		return end, ok
	case '{', '[':
		return 0, false
	}
	end = p
	for end < len(b) && b[end] != ',' && b[end] != '}' && b[end] != ' ' && b[end] != '\t' && b[end] != '\n' && b[end] != '\r' {
		end++
	}
	return end, true
}
