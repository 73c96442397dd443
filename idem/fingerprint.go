package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// OpIDArgument is the name of the tool argument that carries an op id.
const OpIDArgument = "op_id"

// Fingerprint returns the hex SHA-256 of the RFC 8785 (JCS) canonical form of
// args, a JSON object of tool arguments, with its top-level "op_id" member
// removed. Two argument objects that differ only in member order, white
// space or number spelling (1, 1.0, 1e0) have the same fingerprint; any
// changed value changes it. JSON null and an empty input both mean "no
// arguments" and equal {}.
//
// The error for malformed input never holds the input.
func Fingerprint(args json.RawMessage) (string, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return "", errors.New("idem: arguments are not a JSON object")
	}
	// Only arguments that may hold op_id (spelled plainly or escaped) need
	// decoding to drop it; the canonicalizer rejects malformed input.
	var obj map[string]json.RawMessage
	if bytes.Contains(trimmed, []byte("op_id")) || bytes.Contains(trimmed, []byte(`\u`)) {
		if err := json.Unmarshal(trimmed, &obj); err != nil {
			return "", errors.New("idem: arguments are not a JSON object")
		}
	}
	if _, ok := obj[OpIDArgument]; ok {
		delete(obj, OpIDArgument)
		b, err := json.Marshal(obj)
		if err != nil {
			return "", fmt.Errorf("idem: re-encoding arguments: %w", err)
		}
		trimmed = b
	}
	canon, err := jcs.Transform(trimmed)
	if err != nil {
		return "", errors.New("idem: arguments cannot be canonicalized (RFC 8785)")
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
