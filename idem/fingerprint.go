package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

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
// RFC 8785 writes numbers as IEEE doubles, so two numbers that differ only
// past a double's precision (int64 ids above 2^53, long decimals) would share
// a canonical form. Fingerprint adds the exact value of every such number to
// the hash, so they do not share a fingerprint; for arguments without one
// (any number of at most 15 significant digits) the fingerprint is the hash
// of the RFC 8785 form alone.
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
	h := sha256.New()
	h.Write(canon)
	if longDigitRun(trimmed) {
		exact, err := inexactNumbers(trimmed)
		if err != nil {
			return "", err
		}
		for _, line := range exact {
			h.Write([]byte{0})
			h.Write([]byte(line))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// longDigitRun reports whether b holds a run of digits and dots with at least
// 16 digits: only a number with 16 or more significant digits can differ from
// another one with the same double.
func longDigitRun(b []byte) bool {
	n := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n++
			if n >= 16 {
				return true
			}
		case c == '.':
		default:
			n = 0
		}
	}
	return false
}

// inexactNumbers lists, sorted, "path=value" for every number in the JSON
// object b whose exact value a double does not hold, with the value as an
// exact fraction. Numbers whose exponent is too large to handle exactly are
// left to RFC 8785.
func inexactNumbers(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("idem: arguments are not a JSON object")
	}
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), e)
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		case json.Number:
			if exact, ok := exactIfInexact(string(x)); ok {
				out = append(out, path+"="+exact)
			}
		}
	}
	walk("", v)
	sort.Strings(out)
	return out, nil
}

// exactIfInexact returns the exact value of the JSON number s as a fraction
// when the nearest double is not exactly s.
func exactIfInexact(s string) (string, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || e > 400 || e < -400 {
			return "", false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	if d := new(big.Rat).SetFloat64(f); d != nil && d.Cmp(r) == 0 {
		return "", false
	}
	return r.RatString(), true
}
