package oprecord

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzEncodeDocument: EncodeDocument writes what encoding/json writes, byte
// for byte, for any strings (invalid UTF-8, HTML characters, U+2028), any
// results and times.
func FuzzEncodeDocument(f *testing.F) {
	f.Add("alice", "deposit", "op-1", "<a & b>\u2028é", "\xff\x00", `{"content":[{"type":"text","text":"ok"}]}`, `{"balance":1}`, int64(1796000000123456789), int64(3600))
	f.Add("", "t", "\x00\x1f\ud7ff", "", "", `null`, ``, int64(0), int64(-1))
	f.Add("ü/%", "t", "o", "\xed\xa0\x80", "k2j.42", ` [ 1 , {"a" : null} ] `, `"s"`, int64(-62135596800000000), int64(14*3600))
	f.Fuzz(func(t *testing.T, scope, tool, opID, text, attempt, result, output string, nanos, zone int64) {
		if !json.Valid([]byte(result)) || (output != "" && !json.Valid([]byte(output))) {
			return
		}
		at := time.Unix(0, nanos).In(time.FixedZone("", int(zone%(24*3600))))
		r := &Record{Scope: scope, Tool: tool, OpID: opID, Fingerprint: text, ArgsHash: attempt,
			Result: json.RawMessage(result), OutputText: text, Output: json.RawMessage(output),
			CommittedAt: at, ExpiresAt: at.Add(time.Hour), Attempt: attempt}
		type plain Record
		want, wantErr := json.Marshal((*plain)(r))
		got, gotErr := r.EncodeDocument()
		if (gotErr == nil) != (wantErr == nil) || string(got) != string(want) {
			t.Fatalf("EncodeDocument:\n%s (%v)\nencoding/json:\n%s (%v)", got, gotErr, want, wantErr)
		}
	})
}
