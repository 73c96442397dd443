package idem

import (
	"bytes"
	"encoding/json"

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

// parseArgs returns the members of a call's arguments named in want (the
// last of duplicate members, as json.Unmarshal keeps), their values sharing
// args' bytes. Arguments that are not a JSON object give a nil map (the SDK's
// own validation reports them).
func parseArgs(args json.RawMessage, want ...string) map[string]json.RawMessage {
	if len(args) == 0 || !json.Valid(args) {
		return nil
	}
	i := skipSpace(args, 0)
	if args[i] != '{' {
		return nil
	}
	out := noMembers // made on the first member wanted: most calls have one or two
	for i = skipSpace(args, i+1); args[i] == '"'; i = skipSpace(args, i+1) {
		// A valid object: a key string, ':', a value, then ',' or '}'.
		end := stringEnd(args, i)
		raw := args[i+1 : end]
		if bytes.IndexByte(raw, '\\') >= 0 {
			var key string
			if err := json.Unmarshal(args[i:end+1], &key); err != nil {
				return nil
			}
			raw = []byte(key)
		}
		start := skipSpace(args, skipSpace(args, end+1)+1) // past ':'
		stop := valueEnd(args, start)
		for _, w := range want {
			if string(raw) == w {
				if len(out) == 0 {
					out = make(map[string]json.RawMessage, len(want))
				}
				out[w] = bytes.TrimRight(args[start:stop], " \t\r\n")
			}
		}
		if i = stop; args[i] == '}' {
			break
		}
	}
	return out
}

// noMembers is what parseArgs returns for an object without the members it
// looks for; it is never written.
var noMembers = map[string]json.RawMessage{}

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
func opIDOf(args map[string]json.RawMessage, meta mcp.Meta) (string, *Error) {
	var fromArg, fromMeta string
	raw, argSet := args[opIDArgument]
	if argSet {
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &fromArg) != nil {
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
