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
	"github.com/idemkit/sdk/internal/testenv"
)

// The tests in this file run the command as a newcomer does: built with go
// build, started as a process of its own, and read from its output.

// focusBin is the command, built once per test run (TestMain removes it).
var focusBin = &testenv.Binary{Pkg: "."}

func TestMain(m *testing.M) {
	extest.Main(m, "", run, focusBin)
}

// TestDemo runs -demo twice in one folder: it exits 0, prints the table
// with what each call did, prints the same both times apart from the
// server-made session id, and leaves nothing in the folder.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	serverID := regexp.MustCompile(`s-[A-Z2-7]{10}`)
	demo := func() string {
		t.Helper()
		cmd := exec.Command(focusBin.Path(t), "-demo")
		cmd.Dir = dir
		return serverID.ReplaceAllString(extest.Output(t, cmd), "s-ID")
	}
	first, second := demo(), demo()
	if first != second {
		t.Fatalf("two runs differ:\n%s\n---\n%s", first, second)
	}
	header := regexp.MustCompile(`(?m)^#\s+call\s+attempt\s+handler\s+answer$`)
	if !header.MatchString(first) {
		t.Fatalf("no table header:\n%s", first)
	}
	for _, want := range []string{
		"retry, new connection  did not run",
		"(replayed from the stored result)",
		"stopped: end set to 14:05, outcome done",
		"shortened: end moved from 14:20 to 14:05",
		"the same session in both orders",
		"refused: ambiguous_target",
		`"id":"s-mail"`,
		"16 at once",
		"1 distinct answer(s) of 16",
		"the day holds 1750 steps",
		"retry, new op_id       ran                 phone set to 1200, day total 1200 steps",
		"s-mail on phone (yours)",
		"end_focus phone, no session_id         1st                    ran                 stopped: end set to 16:40",
		"25 logged minutes",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("output lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "DIFFERENT") {
		t.Errorf("the two arrival orders stored different sessions:\n%s", first)
	}
	extest.EmptyDir(t, dir)
}

// TestHTTPServesAndStopsOnSIGTERM starts the command over HTTP with a user
// on a SQLite file, calls a tool with the user's token, and sends SIGTERM:
// it exits with status 0 and says it stopped.
func TestHTTPServesAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(focusBin.Path(t), "-http", "127.0.0.1:0", "-user", "tok-a=alice", "-store", "sqlite:"+filepath.Join(dir, "f.db"))
	cmd.Dir = dir
	p := extest.StartHTTP(t, cmd)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.URL, HTTPClient: extest.BearerClient("tok-a")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "start_focus", Arguments: start("phone", "s1", "")})
	if err != nil || res.IsError {
		t.Fatalf("start_focus: %v %v", err, res)
	}
	cs.Close()
	if err := p.Stop(syscall.SIGTERM, 15*time.Second); err != nil || !strings.Contains(p.Log(), "msg=stopped") {
		t.Fatalf("SIGTERM: %v; want a clean exit that logs msg=stopped; stderr:\n%s", err, p.Log())
	}
}
