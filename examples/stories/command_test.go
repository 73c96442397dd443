package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file run the command as a process of its own: the
// test binary acts as the command when STORIES_AS_MAIN is set, so nothing
// is built twice.

func TestMain(m *testing.M) {
	if os.Getenv("STORIES_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// command returns the command with args.
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STORIES_AS_MAIN=1")
	return cmd
}

// TestDemo runs -demo in an empty folder: it exits 0, prints a row per
// call and the figures that show each write landed once, and leaves the
// folder empty (the demo uses a fresh temporary database).
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	cmd := command("-demo")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("-demo: %v; stderr: %s", err, stderr.String())
	}
	got := string(out)
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
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the demo left %v in its folder", left)
	}
}

var urlLine = regexp.MustCompile(`msg="MCP over streamable HTTP" .*url=(http://\S+)`)

// TestHTTPServesAndStopsOnSIGTERM starts the command over HTTP on SQLite
// with one user, publishes through it, and sends SIGTERM: it exits 0
// without waiting out the shutdown timeout.
func TestHTTPServesAndStopsOnSIGTERM(t *testing.T) {
	cmd := command("-http", "127.0.0.1:0", "-user", "tok=alice", "-store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	cmd.Dir = t.TempDir()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	found := make(chan string, 1)
	var lines []string
	var mu sync.Mutex
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("no URL logged within 30 s")
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer("tok")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ok(t, ctx, cs, "publish_story", map[string]any{"slug": "s", "title": "t", "body": "b"})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-logDone; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, strings.Join(lines, "\n"))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
	for _, l := range lines {
		if strings.Contains(l, "still running after") {
			t.Errorf("the shutdown timed out: %s", l)
		}
	}
}
