package idem

import (
	"encoding/json"

	sjson "github.com/segmentio/encoding/json"
)

// MetaOpID is the _meta key that may carry an op id instead of the op_id
// argument. Refusals about an operation (unknown_outcome, busy) carry the op
// id under the same key.
const MetaOpID = "io.idemkit/op_id"

// opIDArgument is the name of the tool argument that carries an op id.
const opIDArgument = "op_id"

// MetaCallers, in a tool's _meta, says who the tool is for: "apps" for a
// tool registered with [ForApps].
const MetaCallers = "io.idemkit/callers"

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

// argMembers are the top-level members of a call's arguments, their values
// as sent.
type argMembers []argMember

type argMember struct {
	name  []byte // a slice of the arguments, or its unescaped copy
	value json.RawMessage
}

// get returns the value of the member name, and whether it is present: the
// last of duplicate members, as json.Unmarshal keeps.
func (m argMembers) get(name string) (json.RawMessage, bool) {
	for i := len(m) - 1; i >= 0; i-- {
		if string(m[i].name) == name {
			return m[i].value, true
		}
	}
	return nil, false
}

// parseArgs returns the members of a call's arguments. Arguments that are
// not a JSON object (null included) give ok false and no members: the schema
// check reports them.
//
// It walks the arguments with segmentio's tokenizer (the go-sdk's own JSON
// library), the values left as slices of the arguments: a decode into a map
// by encoding/json copies every name and value. FuzzParseArgs checks that
// the members are encoding/json's.
func parseArgs(args json.RawMessage) (m argMembers, ok bool) {
	if !json.Valid(args) { // encoding/json's, which refuses nesting deeper than 10,000 and segmentio's does not
		return nil, false
	}
	t := sjson.NewTokenizer(args)
	defer t.Reset(nil) // gives back its stack, which it does itself only at the end of the input
	if !t.Next() || t.Delim != '{' {
		return nil, false
	}
	var name []byte
	start := 0
	for t.Next() && t.Depth > 0 {
		end := len(args) - t.Remaining()
		switch {
		case t.Depth > 1:
		case t.IsKey:
			name = t.String()
		case t.Delim == '{' || t.Delim == '[':
			start = end - 1
		case t.Delim == '}' || t.Delim == ']':
			m = append(m, argMember{name, args[start:end]})
		case t.Delim == 0:
			m = append(m, argMember{name, json.RawMessage(t.Value)})
		}
	}
	return m, true
}

// opIDOf extracts the op id from the argument members and _meta of a call.
// It returns "" when neither carries one. An op id that is present but not a
// string (null included) is refused: a client that sent one meant to be
// protected, and must not be silently run without it.
func opIDOf(args argMembers, meta map[string]any) (string, *Error) {
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

// stringOf returns the string the JSON value raw holds, and whether it is a
// string (decoded by segmentio's Unmarshal: a quarter of encoding/json's
// time; FuzzParseArgs compares the two).
func stringOf(raw json.RawMessage) (string, bool) {
	var s string
	return s, len(raw) > 0 && raw[0] == '"' && sjson.Unmarshal(raw, &s) == nil
}
