package oprecord

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestOwnerIsValidAndDistinct(t *testing.T) {
	scopes := []string{"alice", "a/b", "a%2Fb", "a~b", "%7E", "\x00", "\xff", "ü", "x" + strings.Repeat("é", 300), strings.Repeat("/", 200), strings.Repeat("/", 201)}
	seen := map[string]string{}
	for _, s := range scopes {
		o := Owner(s)
		if err := Key(s, "t", "op").Validate(); err != nil {
			t.Errorf("scope %q: owner %q is not a valid key owner: %v", s, o, err)
		}
		if prev, ok := seen[o]; ok {
			t.Errorf("scopes %q and %q share owner %q", prev, s, o)
		}
		seen[o] = s
	}
	if Owner("") != "" || Owner("alice") != "alice" {
		t.Errorf("Owner changed a plain scope: %q %q", Owner(""), Owner("alice"))
	}
	if Key("a", "t", "op").ID == Key("b", "t", "op").ID {
		t.Error("the op record id does not depend on the scope")
	}
}

// The op record's id is the hex SHA-256 of the length-prefixed scope, tool
// and op id, as records already stored were keyed: it must never change.
func TestKeyIDIsStable(t *testing.T) {
	for _, in := range [][3]string{{"", "t", "op"}, {"alice", "add_note", "op-1"}, {strings.Repeat("s", 300), "t", strings.Repeat("o", 128)}} {
		h := sha256.New()
		for _, s := range in {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(s)))
			h.Write(n[:])
			h.Write([]byte(s))
		}
		if got, want := Key(in[0], in[1], in[2]).ID, hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("Key%q id %s, want %s", in, got, want)
		}
	}
	if got := Key("alice", "add_note", "op-1").ID; got != "4d49b61c60def300c139f3017139f071536b00835b6a7da583307c845183c66b" {
		t.Errorf("id %s: the op record's key changed", got)
	}
}

// FuzzAppendJSON: the op record's own JSON is valid UTF-8 JSON that decodes
// to what encoding/json's does.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{"alice", "", "a\"b\\c\n\r\t\x00\x1f", "<&>", "\xff\xfe", "é\u2028\u2029ü", "\U0001F600"} {
		f.Add(s, `{"content":[{"type":"text","text":"x"}]}`, int64(1700000000123456789))
	}
	f.Add("s", "  null ", int64(0))
	f.Add("0", "{\"\":[{\"\x8c\":\"\"}]}", int64(1700000000123456775)) // invalid UTF-8 in the result
	f.Add("s", `{"a": [1, 2]}`, int64(-62135596800000000))
	f.Fuzz(func(t *testing.T, s, result string, nanos int64) {
		at := time.Unix(0, nanos).UTC()
		rec := &Record{Scope: s, Tool: "t" + s, OpID: "op", Fingerprint: "fp", ArgsHash: s, Result: json.RawMessage(result),
			OutputText: s, CommittedAt: at, ExpiresAt: at.Add(time.Hour), Attempt: s}
		if !json.Valid(rec.Result) {
			rec.Result = nil
		}
		type plain Record
		want, wantErr := json.Marshal((*plain)(rec))
		got, err := rec.AppendJSON(nil)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendJSON error %v, encoding/json's %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) || utf8.Valid(want) && !utf8.Valid(got) {
			t.Fatalf("not valid UTF-8 JSON: %q", got)
		}
		var a, b Record
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		var ra, rb any
		json.Unmarshal(a.Result, &ra)
		json.Unmarshal(b.Result, &rb)
		a.Result, b.Result = nil, nil
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ra, rb) {
			t.Fatalf("decodes to\n%+v\nencoding/json's to\n%+v", a, b)
		}
	})
}
