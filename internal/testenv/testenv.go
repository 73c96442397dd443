// Package testenv finds the services the project's scripts start for its
// tests (scripts/with-*.sh), for the test files of every package.
package testenv

import (
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI (.ci/run sets CI), where a
// missing service or tool fails the run instead of skipping the test.
func InCI() bool { return os.Getenv("CI") != "" }

// Service returns the value of the environment variable name, which script
// sets for the commands it runs (a URL or host:port). Without it the test is
// skipped, or fails in CI: a test that needs a service it cannot find must
// not pass there by skipping.
func Service(t testing.TB, name, script string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if InCI() {
			t.Fatalf("%s is not set: run the tests under %s", name, script)
		}
		t.Skipf("%s is not set; run the tests under %s", name, script)
	}
	return v
}

// Count returns the count the environment variable name holds (a number
// from 1, such as a number of runs), or def when it is not set. Any other
// value fails the test; the message does not repeat it.
func Count(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: want a number from 1", name)
	}
	return n
}
