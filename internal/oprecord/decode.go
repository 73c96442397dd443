package oprecord

import (
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
func (r *Record) UnmarshalJSON(data []byte) error {
	type plain Record // the libraries' reflection, not this method
	saved := *r
	if sjson.Unmarshal(data, (*plain)(r)) == nil {
		return nil
	}
	*r = saved
	return json.Unmarshal(data, (*plain)(r))
}
