// Package argsfp computes the fingerprint of a tool call's arguments: the
// one an op record stores and a repeat is compared by, the one the
// middleware logs, and the one idemclient reports. It is
//
//	the hex SHA-256 of the arguments' JSON object, less its top-level
//	"op_id" member, as encoding/json writes it (members sorted by name at
//	every depth, no white space, <, > and & not escaped) from a decoding
//	that keeps each number as it is spelled.
//
// No arguments, and null, are {}; of two members with one name, the last
// counts, as in the handler's decoding. Two objects that differ only in
// member order or white space have one fingerprint; any changed value, and
// a number spelled another way (2 and 2.0), changes it. For arguments made
// of strings (but for U+2028 and U+2029, which encoding/json escapes),
// booleans, null and integers, the bytes hashed are their RFC 8785 form.
package argsfp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Of returns the fingerprint of args, a JSON object. Its error never
// quotes the input.
func Of(args json.RawMessage) (string, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	// encoding/json would decode invalid UTF-8 as U+FFFD: two different
	// arguments would share a fingerprint.
	if !utf8.Valid(args) {
		return "", errors.New("argsfp: arguments are not valid UTF-8")
	}
	if fp, ok := ofFlat(args); ok {
		return fp, nil
	}
	return ofDecoded(args)
}

// ofDecoded is [Of] for valid UTF-8, by decoding and writing back.
func ofDecoded(args []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || dec.More() {
		return "", errors.New("argsfp: arguments are not a JSON object")
	}
	delete(obj, "op_id")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return "", errors.New("argsfp: arguments cannot be written back")
	}
	sum := Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

// OfValue is [Of] for arguments as a Go value (a map, a struct), as a
// client holds them before they are sent: their JSON, as encoding/json
// writes it, fingerprinted.
func OfValue(args any) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", errors.New("argsfp: arguments cannot be written as JSON")
	}
	return Of(b)
}
