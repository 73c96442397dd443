package oprecord

import (
	"bytes"
	"encoding/json"

	sjson "github.com/segmentio/encoding/json"
)

// UnmarshalJSON decodes an op record as encoding/json decodes into Record's
// fields, with segmentio's decoder (the go-sdk's own JSON library): a replay
// decodes one on every call, and it is five times as fast as encoding/json
// here. Input it refuses goes to encoding/json, whose time parsing is more
// lenient, so that the result, and whether it fails, are encoding/json's on
// any input (FuzzRecordUnmarshalJSON) but one nested deeper than the 10,000
// levels encoding/json reads, which segmentio reads too.
//
// Input with an escape JSON does not have goes to encoding/json too:
// segmentio reads a time's text without unescaping it, and takes a
// backslash where the T should be ("0000-01-01\00:00:00Z").
func (r *Record) UnmarshalJSON(data []byte) error {
	type plain Record // the libraries' reflection, not this method
	saved := *r
	if validEscapes(data) && sjson.Unmarshal(data, (*plain)(r)) == nil {
		return nil
	}
	*r = saved
	return json.Unmarshal(data, (*plain)(r))
}

// validEscapes reports whether every backslash in data begins an escape
// JSON has: \", \\, \/, \b, \f, \n, \r, \t, or \u and four hex digits.
func validEscapes(data []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			return true
		}
		i += j
		if i+1 >= len(data) {
			return false
		}
		switch data[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(data) || !isHex(data[i+2:i+6]) {
				return false
			}
			i += 6
		default:
			return false
		}
	}
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
