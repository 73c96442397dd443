package idem

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaOpID is the _meta key that may carry an op id instead of the op_id
// argument. Refusals about an operation (unknown_outcome, busy) carry the op
// id under the same key.
const MetaOpID = "io.idemkit/op_id"

// Result _meta keys the middleware sets.
const (
	// MetaReplayed is true on a result answered from a stored op record.
	MetaReplayed = "io.idemkit/replayed"
	// MetaError holds the [Code] of a refused call.
	MetaError = "io.idemkit/error"
)

// metaCandidates lists the candidates of an ambiguous_target refusal.
const metaCandidates = "io.idemkit/candidates"

// maxOpIDLen is the longest op id accepted.
const maxOpIDLen = 128

// validateOpID reports whether id is a well-formed op id: 1..128 printable
// ASCII characters (0x21-0x7E, so no spaces). The error never holds id.
func validateOpID(id string) *Error {
	if len(id) == 0 {
		return newError(CodeInvalidOpID, "op_id is empty; mint one (for example a UUID) before the first attempt")
	}
	if len(id) > maxOpIDLen {
		return newError(CodeInvalidOpID, "op_id is longer than 128 characters")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return newError(CodeInvalidOpID, "op_id may hold only printable ASCII characters without spaces")
		}
	}
	return nil
}

// argMembers are the members of a call's arguments that parseArgs looked
// for: vals[i] is the value of the member named names[i], nil when absent.
type argMembers struct {
	names []string
	vals  []json.RawMessage
}

// get returns the value of the member name, and whether it is present.
func (m argMembers) get(name string) (json.RawMessage, bool) {
	for i, n := range m.names {
		if n == name && m.vals[i] != nil {
			return m.vals[i], true
		}
	}
	return nil, false
}

// parseArgs returns the members of a call's arguments named in want (the
// last of duplicate members, as json.Unmarshal keeps), their values sharing
// args' bytes, in buf when it is long enough. Arguments that are not a JSON
// object give ok false and no members (the schema check reports them).
// valid says that args is known to be valid JSON, and need not be checked.
func parseArgs(args json.RawMessage, valid bool, buf []json.RawMessage, want ...string) (m argMembers, ok bool) {
	if len(args) == 0 || !valid && !json.Valid(args) {
		return argMembers{}, false
	}
	i := skipSpace(args, 0)
	if i == len(args) || args[i] != '{' { // white space only: valid for the check when no argument is required
		return argMembers{}, false
	}
	if len(buf) < len(want) {
		buf = make([]json.RawMessage, len(want))
	}
	m = argMembers{names: want, vals: buf[:len(want)]}
	clear(m.vals)
	for i = skipSpace(args, i+1); args[i] == '"'; i = skipSpace(args, i+1) {
		// A valid object: a key string, ':', a value, then ',' or '}'.
		end := stringEnd(args, i)
		raw := args[i+1 : end]
		if bytes.IndexByte(raw, '\\') >= 0 {
			var key string
			if err := json.Unmarshal(args[i:end+1], &key); err != nil {
				return argMembers{}, false
			}
			raw = []byte(key)
		}
		start := skipSpace(args, skipSpace(args, end+1)+1) // past ':'
		stop := valueEnd(args, start)
		for j, w := range want {
			if string(raw) == w {
				m.vals[j] = bytes.TrimRight(args[start:stop], " \t\r\n")
			}
		}
		if i = stop; args[i] == '}' {
			break
		}
	}
	return m, true
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

// opIDOf extracts the op id from the argument members and _meta of a call.
// It returns "" when neither carries one. An op id that is present but not a
// string (null included) is refused: a client that sent one meant to be
// protected, and must not be silently run without it.
func opIDOf(args argMembers, meta mcp.Meta) (string, *Error) {
	var fromArg, fromMeta string
	raw, argSet := args.get(opIDArgument)
	if argSet {
		var ok bool
		if fromArg, ok = stringOf(raw); !ok {
			return "", newError(CodeInvalidOpID, "op_id must be a string")
		}
	}
	v, metaSet := meta[MetaOpID]
	if metaSet {
		s, isStr := v.(string)
		if !isStr {
			return "", newError(CodeInvalidOpID, "the _meta op id must be a string")
		}
		fromMeta = s
	}
	switch {
	case argSet && metaSet && fromArg != fromMeta:
		return "", newError(CodeInvalidOpID, "op_id argument and _meta op id differ; send one")
	case argSet:
		return fromArg, validateOpID(fromArg)
	case metaSet:
		return fromMeta, validateOpID(fromMeta)
	}
	return "", nil
}

// stringOf returns the string the JSON value raw (valid JSON) holds, and
// whether it is a string.
func stringOf(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	plain := true // ASCII without escapes: the bytes are the string
	for _, c := range inner {
		plain = plain && c != '\\' && c < utf8.RuneSelf
	}
	if plain {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}
