package oprecord

import (
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
