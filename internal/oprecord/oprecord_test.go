package oprecord

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
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
