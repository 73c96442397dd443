package canary_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/sdk/cmd/idem/internal/canary"
)

func runMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := canary.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// -h explains the command to a newcomer and exits 0.
func TestHelp(t *testing.T) {
	code, out, errs := runMain("-h")
	if code != 0 || out != "" {
		t.Fatalf("-h: exit %d, stdout %q", code, out)
	}
	for _, s := range []string{"Usage: idem canary", "post-commit disconnect", "increment_then_drop", "set_status_then_drop",
		"lookup", "PASS", "FAIL", "MISS", "-policy", "-url", "-serve", "-json", "-store", "exit status"} {
		if !strings.Contains(errs, s) {
			t.Errorf("-h does not mention %q", s)
		}
	}
}

// Usage errors exit 2 and say what is wrong.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-policy", "sometimes"},
		{"-drop", "later", "-serve", "127.0.0.1:0"},
		{"-url", "ftp://host"},
		{"-url", "http://127.0.0.1:1", "-serve", "127.0.0.1:0"},
		{"extra"},
		{"-nosuchflag"},
	} {
		code, _, errs := runMain(args...)
		if code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
}

// The default run starts a canary, runs the matrix with the safe-retry
// client on SQLite, prints one record per case and exits 0.
func TestMainRunsTheMatrix(t *testing.T) {
	code, out, errs := runMain("-store", "sqlite:"+filepath.Join(t.TempDir(), "canary.db"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if n := strings.Count(out, "server_invocations:"); n != len(canary.Cases) {
		t.Errorf("%d records, want %d", n, len(canary.Cases))
	}
	if !strings.Contains(out, "10 cases: 10 PASS, 0 FAIL, 0 MISS") {
		t.Errorf("no summary of 10 passes:\n%s", out)
	}
}

// The naive policy fails the matrix: exit 1, and -json gives one record a
// line.
func TestMainFailsTheNaivePolicy(t *testing.T) {
	code, out, _ := runMain("-policy", "always", "-json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(canary.Cases) {
		t.Fatalf("%d lines, want %d", len(lines), len(canary.Cases))
	}
	fails := 0
	for _, l := range lines {
		var r canary.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if r.Verdict == canary.Fail {
			fails++
		}
		if r.Case == "unsafe-reset" && (r.ServerInvocations != 2 || r.Verdict != canary.Fail) {
			t.Errorf("unsafe-reset: %+v; want 2 invocations and FAIL", r)
		}
	}
	if fails == 0 {
		t.Error("no FAIL")
	}
}

// -url runs the matrix against a canary served elsewhere, given its root
// or its /mcp endpoint.
func TestMainAgainstURL(t *testing.T) {
	_, base := start(t, defaults)
	for _, u := range []string{base, base + "/mcp"} {
		code, out, errs := runMain("-url", u)
		if code != 0 || !strings.Contains(out, "10 PASS") {
			t.Fatalf("-url %s: exit %d\n%s\n%s", u, code, out, errs)
		}
	}
	code, _, errs := runMain("-url", "http://127.0.0.1:1")
	if code != 1 || errs == "" {
		t.Fatalf("-url to nothing: exit %d, stderr %q; want 1 and a message", code, errs)
	}
}
