package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/idemkit/sdk/internal/oprecord"
)

// opIDArgument is the name of the tool argument that carries an op id.
const opIDArgument = "op_id"

// fingerprintArgs returns the hex SHA-256 of the RFC 8785 (JCS) canonical form of
// args, a JSON object of tool arguments, with its top-level "op_id" member
// removed. Two argument objects that differ only in member order, white
// space or number spelling (1, 1.0, 1e0) have the same fingerprint; any
// changed value changes it. JSON null and an empty input both mean "no
// arguments" and equal {}.
//
// RFC 8785 writes numbers as IEEE doubles, so two numbers that differ only
// past a double's precision (int64 ids above 2^53, long decimals) would share
// a canonical form. Fingerprint adds the exact value of every number whose
// value the canonical form does not hold to the hash, so such numbers do not
// share a fingerprint. Numbers are compared by value, whatever their
// spelling; for arguments whose numbers the canonical form holds exactly
// (every number with at most 15 significant digits, every float64 Go
// marshaled) the fingerprint is the hash of the RFC 8785 form alone.
//
// The error for malformed input never holds the input.
func fingerprintArgs(args json.RawMessage) (string, error) {
	sum, err := fingerprintSum(args)
	if err != nil {
		return "", err
	}
	return oprecord.Hex(sum), nil
}

// fingerprintSum is fingerprintArgs before the hex encoding: the arguments
// decoded to drop op_id (the last of duplicate members counting, as in the
// handler's decoding), canonicalized by the RFC 8785 library, and hashed
// with the exact value of every number the canonical form does not hold.
// The usual arguments take appendCanonical instead, which writes the same
// bytes without the library's decoding.
func fingerprintSum(args json.RawMessage) ([sha256.Size]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return [sha256.Size]byte{}, errors.New("idem: arguments are not a JSON object")
	}
	if !utf8.Valid(trimmed) {
		return [sha256.Size]byte{}, errors.New("idem: arguments are not valid UTF-8")
	}
	if json.Valid(trimmed) {
		var buf [512]byte
		if canon, ok := appendCanonical(buf[:0], trimmed, opIDArgument); ok {
			return sha256.Sum256(canon), nil
		}
	}
	return libraryFingerprint(trimmed)
}

// libraryFingerprint is fingerprintSum, with the RFC 8785 library, for the
// trimmed argument object in valid UTF-8 that appendCanonical (fastpath.go)
// does not take.
func libraryFingerprint(trimmed []byte) ([sha256.Size]byte, error) {
	// Only arguments that may hold op_id (plainly or escaped) are decoded.
	if bytes.Contains(trimmed, []byte("op_id")) || bytes.Contains(trimmed, []byte(`\u`)) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &obj); err != nil {
			return [sha256.Size]byte{}, errors.New("idem: arguments are not a JSON object")
		}
		if _, ok := obj[opIDArgument]; ok {
			delete(obj, opIDArgument)
			b, err := json.Marshal(obj)
			if err != nil {
				return [sha256.Size]byte{}, fmt.Errorf("idem: re-encoding arguments: %w", err)
			}
			trimmed = b
		}
	}
	canon, err := jcs.Transform(trimmed)
	if err != nil {
		return [sha256.Size]byte{}, errors.New("idem: arguments cannot be canonicalized (RFC 8785)")
	}
	h := sha256.New()
	h.Write(canon)
	if longDigitRun(trimmed) {
		exact, err := inexactNumbers(trimmed)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		for _, line := range exact {
			// Length-prefixed, so no key can forge a line boundary.
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(line)))
			h.Write(n[:])
			h.Write([]byte(line))
		}
	}
	return [sha256.Size]byte(h.Sum(nil)), nil
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

// inexactNumbers lists, sorted, the exact values of the numbers in the JSON
// object b that RFC 8785 would not write exactly, each as the JSON encoding
// of [pointer, value] with the value in a normal form (sign, digits,
// exponent). It takes time linear in the size of b.
func inexactNumbers(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("idem: arguments are not a JSON object")
	}
	escape := strings.NewReplacer("~", "~0", "/", "~1")
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"/"+escape.Replace(k), e)
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		case json.Number:
			if exact, ok := lostByDouble(string(x)); ok {
				line, _ := json.Marshal([2]string{path, exact})
				out = append(out, string(line))
			}
		}
	}
	walk("", v)
	sort.Strings(out)
	return out, nil
}

// lostByDouble returns the normal form of the JSON number s when the
// shortest decimal of its nearest double (what RFC 8785 writes) has another
// value.
func lostByDouble(s string) (string, bool) {
	exact, ok := normalDecimal(s)
	if !ok {
		return "", false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false // out of a double's range: RFC 8785 refuses it
	}
	written, ok := normalDecimal(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok || written == exact {
		return "", false
	}
	return exact, true
}

// normalDecimal writes the value of the decimal number s as
// [-]digits"e"exponent, digits without leading or trailing zeros ("0" for
// zero, whatever its sign), so that two spellings of one value give one
// string. It reports false for malformed input or an exponent beyond int32.
func normalDecimal(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 32)
		if err != nil {
			return "", false
		}
		exp, s = int(e), s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if trimmed == "" {
		return "0", true
	}
	for _, c := range trimmed {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp), true
}
