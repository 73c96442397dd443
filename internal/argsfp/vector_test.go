package argsfp

import (
	"crypto/sha256"
	"strings"
	"testing"
)

func TestSum256(t *testing.T) {
	for _, in := range []string{"", "op-1", strings.Repeat("x", 1000)} {
		if got, want := Sum256([]byte(in)), sha256.Sum256([]byte(in)); got != want {
			t.Errorf("Sum256(%d bytes) = %x, want %x", len(in), got, want)
		}
	}
}
