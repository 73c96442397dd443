package main

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
)

// The tests in this file run the command as a newcomer does: built with go
// build, started as a process of its own, and read from its output.

// runCommand runs the command with args in a fresh folder, within a
// deadline, and returns its exit code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string, dir string) {
	t.Helper()
	cmd := exec.Command(trackerBin.Path(t), args...)
	cmd.Dir = t.TempDir()
	code, stdout, stderr = extest.Run(t, cmd)
	return code, stdout, stderr, cmd.Dir
}

// TestDemo runs -demo: it exits 0 within a few seconds, prints the table
// with what the tracker received at each step and the counts, and leaves
// its folder empty (the demo's store is a temporary one).
func TestDemo(t *testing.T) {
	trackerBin.Path(t) // built before the clock starts
	start := time.Now()
	code, out, stderr, dir := runCommand(t, "-demo")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("-demo exited %d; stderr:\n%s", code, stderr)
	}
	t.Logf("-demo took %v:\n%s", took.Round(time.Millisecond), out)
	if took > 10*time.Second {
		t.Errorf("-demo took %v, want a few seconds", took)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 2 && line[0] >= '1' && line[0] <= '9' && strings.Contains(line, "  ") {
			rows++
		}
	}
	if rows != 11 {
		t.Errorf("%d steps in the table, want 11:\n%s", rows, out)
	}
	// The columns' widths aside.
	flat := regexp.MustCompile(` {2,}`).ReplaceAllString(out, "|")
	for _, want := range []string{
		`1|create_issue "Crash on start"|1st, answer lost|1 create|no answer`,
		`2|create_issue "Crash on start"|retry, same arguments|nothing|issue #1 "Crash on start" (replayed)`,
		`3|create_issue "Login fails on Safari"|1st: tracker made it, then 502|1 create|unknown_outcome`,
		`4|create_issue "Login fails on Safari"|retry: reconcile finds it|1 read|issue #2 "Login fails on Safari" (replayed)`,
		`6|create_issue "Dark mode"|retry at once: none found yet|1 read|unknown_outcome`,
		`7|create_issue "Dark mode"|retry past the lease: none|1 read, 1 create|issue #3 "Dark mode"`,
		`8 at once|1 create|comment 1, 1 distinct answer to the 8, 7 replayed`,
		`10|create_issue "Export is slow"|the model's retry, same args|nothing|issue #4 "Export is slow" (replayed)`,
		`4 issues: #4 #3 #2 #1`,
		"Upstream: 5 issue creates received, 4 issues made",
		"1 comment create received,\n1 comment made.",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	extest.EmptyDir(t, dir)
}

// TestFlagsRefuse: flags that cannot work are refused with status 2,
// naming the flag and never echoing its value.
func TestFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"-demo", "-api", "http://127.0.0.1:1"},
		{"-api", "ftp://SECRET@example.com"},
		{"-api", "SECRET"},
		{"-lease", "-1s"},
		{"-ttl", "0s"},
	} {
		code, _, stderr, _ := runCommand(t, args...)
		if code != 2 || !strings.Contains(stderr, strings.TrimPrefix(args[len(args)-2], "-")) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the flag named", args, code, stderr)
		}
		if strings.Contains(stderr, "SECRET") {
			t.Errorf("%v: stderr echoes the value: %q", args, stderr)
		}
	}
}

// TestHelp runs -h: it exits 0 and shows the guard's flags beside the
// shared ones.
func TestHelp(t *testing.T) {
	code, _, stderr, _ := runCommand(t, "-h")
	if code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, want := range []string{"Examples:\n  tracker -demo\n", "-api", "TRACKER_TOKEN", "-ttl", "-lease", "-store", "-user"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-h lacks %q:\n%s", want, stderr)
		}
	}
}

// TestServesOverHTTPAndStdio runs the command against its own fake
// tracker (no -api): over HTTP, a create sent twice makes one issue, the
// second answer replayed, and list_issues reads it; over stdio, the same.
func TestServesOverHTTPAndStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check := func(t *testing.T, call func(tool string, args any) *mcp.CallToolResult) {
		t.Helper()
		args := issueArgs("Crash on start")
		first, second := call("create_issue", args), call("create_issue", args)
		if a, b := issueOf(t, first), issueOf(t, second); a != b || replayed(first) || !replayed(second) {
			t.Fatalf("answers %+v and %+v, replayed %v and %v; want one issue, the second replayed", a, b, replayed(first), replayed(second))
		}
		var list Issues
		if err := remarshal(call("list_issues", map[string]any{"repo": "acme/app"}).StructuredContent, &list); err != nil || len(list.Issues) != 1 {
			t.Fatalf("list_issues: %+v (%v), want the one issue", list, err)
		}
	}
	t.Run("http", func(t *testing.T) {
		p := startServer(t, "-store", "memory:")
		hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		check(t, func(tool string, args any) *mcp.CallToolResult {
			res, err := callAt(ctx, p.URL, hc, tool, args)
			if err != nil {
				t.Fatal(err)
			}
			return res
		})
	})
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, trackerBin.Path(t), "-store", "memory:")
		cmd.Dir = t.TempDir()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, func(tool string, args any) *mcp.CallToolResult {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			return res
		})
	})
}
