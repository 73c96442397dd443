package oprecord

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// stdDecode is what encoding/json makes of data, without Record's method.
func stdDecode(data []byte, r *Record) error {
	type plain Record
	return json.Unmarshal(data, (*plain)(r))
}

// prefilled is a record with every field set, to decode over: what a
// decode leaves alone must stay.
func prefilled() Record {
	return Record{Scope: "s0", Tool: "t0", OpID: "o0", Fingerprint: "f0", ArgsHash: "h0",
		Result: json.RawMessage(`{"old":1}`), OutputText: "x0", Output: json.RawMessage(`[0]`),
		CommittedAt: time.Unix(1, 0).UTC(), ExpiresAt: time.Unix(2, 0).UTC(), Attempt: "a0"}
}

// sameAsStd decodes data with UnmarshalJSON and with encoding/json, over
// the same starting record, and fails t if they differ in the record or in
// whether they fail.
func sameAsStd(t *testing.T, data []byte, start Record) {
	t.Helper()
	got, want := start, start
	// The decoder's input is overwritten after it returns, as a store's
	// read buffer is: the record must not keep it.
	in := append([]byte(nil), data...)
	gotErr := got.UnmarshalJSON(in)
	for i := range in {
		in[i] = 'x'
	}
	wantErr := stdDecode(data, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: UnmarshalJSON error %v, encoding/json error %v", data, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nUnmarshalJSON %#v\nencoding/json %#v", data, got, want)
	}
}

// storedRecords are op records as stores give them back: as AppendJSON
// writes them, and as PostgreSQL's jsonb prints them (members reordered,
// a space after each colon and comma).
func storedRecords(t testing.TB) [][]byte {
	recs := []Record{
		{Scope: "alice", Tool: "deposit", OpID: "op-1", Fingerprint: "f1", ArgsHash: "h1",
			Result:     json.RawMessage(`{"content":[{"type":"text","text":"ok \"quoted\" \u00e9\n"}],"structuredContent":{"balance":1}}`),
			OutputText: `{"balance":1,"note":"<a & b>\u2028é"}`, CommittedAt: time.Date(2026, 12, 2, 1, 2, 3, 123456789, time.UTC),
			ExpiresAt: time.Date(2026, 12, 3, 1, 2, 3, 0, time.FixedZone("", 3600)), Attempt: "k2j.42"},
		{Tool: "t", OpID: "\x00\x1f\ud7ff", Fingerprint: "f", Result: json.RawMessage(`null`), Output: json.RawMessage(`{"a":[1,2.5e-3,-0,true,false,null]}`)},
		{Scope: "ü/%", Tool: "t", OpID: "o", Result: json.RawMessage(`[]`)},
	}
	var out [][]byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out,
		[]byte(`{"tool": "deposit", "op_id": "op-123456", "scope": "", "result": {"content": [{"text": "ok", "type": "text"}], "structuredContent": {"balance": 1}}, "attempt": "3k2j4h5g6f7d.42", "args_hash": "6f1ed002ab5595859014ebf0951522d9a1b2c3d4e5f60718293a4b5c6d7e8f90", "expires_at": "2026-12-03T01:02:03.123456789Z", "fingerprint": "a1b2c3d4e5f60718293a4b5c6d7e8f906f1ed002ab5595859014ebf0951522d9", "output_text": "{\"balance\":1}", "committed_at": "2026-12-02T01:02:03.123456789Z"}`),
		[]byte(`{"tool": "t", "op_id": "\ud83d\ude00 \u00e9", "scope": "s", "result": null, "output": {"k": "\ud800"}, "expires_at": "0001-01-01T00:00:00Z", "fingerprint": "", "committed_at": "0001-01-01T00:00:00Z"}`),
	)
}

// TestUnmarshalJSONReadsStoredRecords: records as stores return them are
// decoded to what encoding/json makes of them.
func TestUnmarshalJSONReadsStoredRecords(t *testing.T) {
	for _, data := range storedRecords(t) {
		sameAsStd(t, data, Record{})
		sameAsStd(t, data, prefilled())
	}
}

// TestUnmarshalJSONAsEncodingJSON: the edges where a JSON library could
// part from encoding/json give its result or its error.
func TestUnmarshalJSONAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"SCOPE":"a","Tool":"b","oP_iD":"c"}`,     // names match without regard to case
		`{"\u0073cope":"a"}`,                       // an escaped name
		`{"ſcope":"a","K":1}`,                      // names that fold by Unicode rules
		`{"scope":5,"tool":"t"}`,                   // a type error: the rest is still decoded
		`{"committed_at":"yesterday"}`,             // a time that does not parse
		`{"committed_at":"0000-01-01T0:00:00,0Z"}`, // a time encoding/json takes and segmentio's parser does not
		`{"committed_at":5}`,                       // a time that is not a string
		`{"scope":"a",}`,                           // invalid JSON
		`{"scope":"a"} {}`,                         // data after the value
		`{"scope":"a\u00"}`,                        // a short escape
		`{"result":01}`,                            // a number with a leading zero
		`{"result":[1,]}`,                          // a trailing comma
		`{"result":"\x01"}`,                        // a control character in a string
		`[]`, `"x"`, `5`, ``, ` `, `nul`, `{`, `}`, // not an object
		` null `, `{}`, `{"scope":null,"result":null,"committed_at":null}`, `{"unknown":{"a":[1,{"b":"\ud800"}]},"tool":"t"}`,
		`{"scope":"a","scope":"b"}`, `{"output_text":"\ud800\udc00\ud800x\\\/\b\f\n\r\t"}`, "{\"tool\":\"\xff\xfe\"}",
	} {
		sameAsStd(t, []byte(in), Record{})
		sameAsStd(t, []byte(in), prefilled())
	}
}

// FuzzRecordUnmarshalJSON: on any input, UnmarshalJSON fails when
// encoding/json fails, and otherwise decodes what encoding/json decodes.
func FuzzRecordUnmarshalJSON(f *testing.F) {
	for _, data := range storedRecords(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"SCOPE":"a","result":[1,{"b":null}],"output_text":"\u00e9\ud800"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsStd(t, data, Record{})
		sameAsStd(t, data, prefilled())
	})
}

func BenchmarkRecordUnmarshalJSON(b *testing.B) {
	data := storedRecords(b)[3]
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Record
			if err := r.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The part of a record a replay needs, as the middleware decodes it
	// with encoding/json.
	b.Run("encoding-json-answer-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var a struct {
				Fingerprint string          `json:"fingerprint"`
				ArgsHash    string          `json:"args_hash"`
				Result      json.RawMessage `json:"result"`
				OutputText  string          `json:"output_text,omitempty"`
				Output      json.RawMessage `json:"output,omitempty"`
			}
			if err := json.Unmarshal(data, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Record
			if err := stdDecode(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
