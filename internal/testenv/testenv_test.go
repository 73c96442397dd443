package testenv

import (
	"fmt"
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

// A count is a number from 1; the default stands for an unset variable, and
// a bad value fails without being repeated.
func TestCount(t *testing.T) {
	t.Setenv("IDEMKIT_TESTENV_COUNT", "")
	if got := Count(t, "IDEMKIT_TESTENV_COUNT", 7); got != 7 {
		t.Errorf("unset: got %d, want the default 7", got)
	}
	t.Setenv("IDEMKIT_TESTENV_COUNT", "12")
	if got := Count(t, "IDEMKIT_TESTENV_COUNT", 7); got != 12 {
		t.Errorf("12: got %d", got)
	}
	for _, bad := range []string{"0", "-3", "x1", "1.5"} {
		t.Setenv("IDEMKIT_TESTENV_COUNT", bad)
		rec := &recorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			Count(rec, "IDEMKIT_TESTENV_COUNT", 7)
		}()
		if !rec.failed {
			t.Errorf("%q: accepted", bad)
		}
		if strings.Contains(rec.msg, bad) {
			t.Errorf("%q: the message repeats the value: %s", bad, rec.msg)
		}
	}
}

// recorder is a testing.TB whose Fatalf records the failure and stops the
// calling function with a panic its caller recovers.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	panic(r)
}
