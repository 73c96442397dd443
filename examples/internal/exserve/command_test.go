package exserve

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// start starts a command named ex with args and check, as an example's
// run does, and returns what it logged.
func start(t *testing.T, check func() error, args ...string) (*Command, int, string) {
	t.Helper()
	var f Flags
	var log strings.Builder
	fs := f.FlagSet("ex", &log, "memory:", "ex -demo")
	c, status := f.Start(fs, args, check)
	if c != nil {
		t.Cleanup(c.Close)
	}
	return c, status, log.String()
}

// Start ends the command with its status, logged, where flags cannot work
// or the store does not open, and exits 0 for -h.
func TestStartRefuses(t *testing.T) {
	refuse := func() error { return errors.New("-own: refused") }
	for _, c := range []struct {
		name   string
		check  func() error
		args   []string
		status int
		log    string
	}{
		{"help", refuse, []string{"-h"}, 0, "Usage: ex"},
		{"bad flag", nil, []string{"-no-such-flag"}, 2, "flag provided but not defined"},
		{"shared flag", nil, []string{"-ttl", "0s"}, 2, `level=ERROR msg="-ttl must be above zero`},
		{"own flag", refuse, nil, 2, `level=ERROR msg="-own: refused" server=ex`},
		{"store", nil, []string{"-store", "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")}, 1, `level=ERROR msg="opening the store" server=ex`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, status, log := start(t, c.check, c.args...)
			if cmd != nil || status != c.status || !strings.Contains(log, c.log) {
				t.Errorf("command %v, status %d, log %q; want none, %d and %q", cmd, status, log, c.status, c.log)
			}
		})
	}
}

// A started command has its store open, and Exit logs that it stopped and
// returns 0, or 1 with the error.
func TestStartAndExit(t *testing.T) {
	var checked bool
	c, status, _ := start(t, func() error { checked = true; return nil }, "-store", "memory:")
	if c == nil || c.Store == nil || c.Ctx.Err() != nil || !checked {
		t.Fatalf("command %+v (status %d), checked %v; want it started on an open store", c, status, checked)
	}
	var log strings.Builder
	c.Log = Logger(&log, "ex")
	if got := c.Exit(nil); got != 0 || !strings.Contains(log.String(), "level=INFO msg=stopped server=ex") {
		t.Errorf("Exit(nil) = %d, log %q; want 0 and stopped", got, log.String())
	}
	log.Reset()
	if got := c.Exit(errors.New("boom")); got != 1 || !strings.Contains(log.String(), "level=ERROR msg=stopped server=ex err=boom") {
		t.Errorf("Exit(boom) = %d, log %q; want 1 and the error", got, log.String())
	}
}
