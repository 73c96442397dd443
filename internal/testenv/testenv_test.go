package testenv

import (
	"strings"
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

// A package that does not build is named in Build's error; one that does
// leaves its binary.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	good, bad := dir+"/good", dir+"/bad"
	err := Build(map[string]string{good: "../crashtest/crashserver", bad: "./no-such-package"})
	if err == nil || !strings.Contains(err.Error(), "no-such-package") {
		t.Fatalf("Build = %v, want an error naming the missing package", err)
	}
	if strings.Contains(err.Error(), "../crashtest/crashserver") {
		t.Errorf("the error names a package that built: %v", err)
	}
}
