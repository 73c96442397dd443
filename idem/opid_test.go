package idem_test

import (
	"strings"
	"testing"

	"github.com/idemkit/sdk/idem"
)

func TestValidateOpID(t *testing.T) {
	good := []string{"a", "op-1", "550e8400-e29b-41d4-a716-446655440000", strings.Repeat("x", 128), "!~"}
	bad := []string{"", strings.Repeat("x", 129), "has space", "tab\there", "nl\n", "del\x7f", "é", "nul\x00"}
	for _, s := range good {
		if err := idem.ValidateOpID(s); err != nil {
			t.Errorf("ValidateOpID(%q): %v", s, err)
		}
	}
	for _, s := range bad {
		err := idem.ValidateOpID(s)
		if idem.CodeOf(err) != idem.CodeInvalidOpID {
			t.Errorf("ValidateOpID(%q) = %v, want invalid_op_id", s, err)
		}
	}
}

func FuzzValidateOpID(f *testing.F) {
	for _, s := range []string{"op-1", "", " ", "\x00", strings.Repeat("y", 200), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := idem.ValidateOpID(s)
		ok := len(s) >= 1 && len(s) <= 128
		for i := 0; i < len(s); i++ {
			ok = ok && s[i] >= 0x21 && s[i] <= 0x7e
		}
		if ok != (err == nil) {
			t.Fatalf("ValidateOpID(%q) = %v, want ok=%v", s, err, ok)
		}
		if err != nil {
			if idem.CodeOf(err) != idem.CodeInvalidOpID {
				t.Fatalf("code %q", idem.CodeOf(err))
			}
			if len(s) >= 4 && strings.Contains(err.Error(), s) {
				t.Fatalf("error echoes the op id")
			}
		}
	})
}
