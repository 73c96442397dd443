package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/extest"
)

// The tests in this file run the command as a process of its own: the
// test binary acts as the command when STORIES_AS_MAIN is set, so nothing
// is built twice.

func TestMain(m *testing.M) {
	extest.Main(m, "STORIES_AS_MAIN", run)
}

// command returns the command with args.
func command(args ...string) *exec.Cmd {
	return extest.AsMain("STORIES_AS_MAIN", args...)
}

// TestDemo runs -demo in an empty folder: it exits 0, prints a row per
// call and the figures that show each write landed once, and leaves the
// folder empty (the demo uses a fresh temporary database).
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	cmd := command("-demo")
	cmd.Dir = dir
	got := extest.Output(t, cmd)
	for _, want := range []string{
		"call  ", "handler ran",
		"publish_story slug=login-loop", "no answer: the connection closed after the server committed",
		`{"handle":"@ana","reproductions":1,"slug":"login-loop"} (replayed)`,
		"report_reproduction x16 in parallel (one handle)",
		"login-loop: revision 2, 17 reproductions, 1 checks.",
		"social service: 20 requests, 0 repeated keys; 2 announcements, 17 reproduction notices, 1 revision notices.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, got)
		}
	}
	if rows := regexp.MustCompile(`(?m)^(publish_story|report_reproduction|edit_story|report_check|get_story|get_operation) `).FindAllString(got, -1); len(rows) != 15 {
		t.Errorf("%d rows of calls, want 15:\n%s", len(rows), got)
	}
	if !regexp.MustCompile(`(?m)^edit_story slug=login-loop revision=1 +reworded body +yes +refused \(not_saved\)$`).MatchString(got) {
		t.Errorf("the demo's reworded edit on an old revision was not refused with not_saved:\n%s", got)
	}
	extest.EmptyDir(t, dir)
}

// TestHTTPServesAndStopsOnSIGTERM starts the command over HTTP on SQLite
// with one user, publishes through it, and sends SIGTERM: it exits 0
// without waiting out the shutdown timeout.
func TestHTTPServesAndStopsOnSIGTERM(t *testing.T) {
	cmd := command("-http", "127.0.0.1:0", "-user", "tok=alice", "-store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	cmd.Dir = t.TempDir()
	p := extest.StartHTTP(t, cmd)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: p.URL, HTTPClient: extest.BearerClient("tok")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ok(t, ctx, cs, "publish_story", map[string]any{"slug": "s", "title": "t", "body": "b"})
	if err := p.Stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}
