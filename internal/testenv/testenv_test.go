package testenv

import (
	"testing"
)

// A set variable is returned as it is.
func TestServiceReturnsTheValue(t *testing.T) {
	t.Setenv("IDEMKIT_TESTENV_PROBE", "127.0.0.1:1")
	if got := Service(t, "IDEMKIT_TESTENV_PROBE", "scripts/none.sh"); got != "127.0.0.1:1" {
		t.Fatalf("Service = %q", got)
	}
}

// Any value of CI counts, not only "true": a CI that sets CI=1 must not
// skip the tests that need services.
func TestInCIForAnyValue(t *testing.T) {
	for _, v := range []string{"true", "1", "yes"} {
		t.Setenv("CI", v)
		if !InCI() {
			t.Errorf("CI=%q not taken for CI", v)
		}
	}
	t.Setenv("CI", "")
	if InCI() {
		t.Error("an empty CI taken for CI")
	}
}
