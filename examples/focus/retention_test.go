package main

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/examples/internal/exserve"
	"github.com/idemkit/sdk/examples/internal/extest"
	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
)

// serveCommand starts the command over HTTP on a free port with args and
// returns its endpoint; the process is killed when the test ends.
func serveCommand(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(focusBin.Path(t), append([]string{"-http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	return extest.StartHTTP(t, cmd).URL
}

// addAgain sends add_steps with one op id and returns the day's steps it
// answered and whether the answer was a replay.
func addAgain(t *testing.T, cs *mcp.ClientSession) (daySteps int64, replayed bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add_steps",
		Arguments: map[string]any{"date": "2026-03-02", "steps": 100, "op_id": "op-ttl"}})
	if err != nil || res.IsError {
		t.Fatalf("add_steps: %v %s", err, text(res))
	}
	var out StepsAdded
	structured(t, res, &out)
	replayed, _ = res.Meta[idem.MetaReplayed].(bool)
	return out.DaySteps, replayed
}

// checkTTL sends a call with an op id three times: at once, again at once,
// and again 1.2 s after the first answer. Under a TTL of a second the
// second is answered from the stored answer, and the third runs again
// since the answer is no longer kept.
func checkTTL(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	first, _ := addAgain(t, cs)
	answered := time.Now()
	if again, replayed := addAgain(t, cs); !replayed || again != first {
		t.Fatalf("the repeat within the TTL: replayed %v, day %d steps; want the first answer, %d", replayed, again, first)
	}
	time.Sleep(time.Until(answered.Add(1200 * time.Millisecond)))
	if late, replayed := addAgain(t, cs); replayed || late != 2*first {
		t.Fatalf("the repeat after the TTL: replayed %v, day %d steps; want a new run, %d", replayed, late, 2*first)
	}
}

// TestTTLFlag: the server the flags -ttl 1s configure keeps an answer for
// a second.
func TestTTLFlag(t *testing.T) {
	checkTTL(t, connectFlags(t, "-store", "memory:", "-ttl", "1s"))
}

// connectFlags serves the server as the flags args configure it, in this
// process, and returns an in-process client of it.
func connectFlags(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	var f exserve.Flags
	if err := f.Parse(flagSet(&f, io.Discard), args); err != nil {
		t.Fatal(err)
	}
	s, done, err := f.OpenStore(t.Context(), slog.New(slog.DiscardHandler), "focus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	cs, err := idemtest.Connect(t.Context(), NewServer(s, configOf(&f, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestTTLFlagCommand runs the command over HTTP with -ttl 1s: its answers
// are kept for a second.
func TestTTLFlagCommand(t *testing.T) {
	url := serveCommand(t, "-store", "memory:", "-ttl", "1s")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	checkTTL(t, cs)
}

// TestMaxStoredBytesFlag: the server the flags -max-stored-bytes 10
// configure keeps at most 10 bytes of a user's answers: a call with an op
// id, whose answer is larger, is refused quota_exceeded.
func TestMaxStoredBytesFlag(t *testing.T) {
	cs := connectFlags(t, "-store", "memory:", "-max-stored-bytes", "10")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add_steps",
		Arguments: map[string]any{"date": "2026-03-02", "steps": 100, "op_id": "op-bound"}})
	if err != nil || !res.IsError || codeOf(res) != string(idem.CodeQuotaExceeded) {
		t.Fatalf("add_steps under -max-stored-bytes 10: %v, code %q: %s; want quota_exceeded", err, codeOf(res), text(res))
	}
}

// TestRetentionFlagsRefused: a -ttl or -sweep-every that is not positive,
// or a negative -max-stored-bytes, exits with status 2 before anything
// opens, naming the flag.
func TestRetentionFlagsRefused(t *testing.T) {
	for _, args := range [][]string{{"-ttl", "0s"}, {"-ttl", "-5m"}, {"-sweep-every", "0"}, {"-sweep-every", "-1s"}, {"-max-stored-bytes", "-1"}} {
		dir := t.TempDir()
		cmd := exec.Command(focusBin.Path(t), append(args, "-store", "sqlite:f.db")...)
		cmd.Dir = dir
		code, _, stderr := extest.Run(t, cmd)
		if code != 2 || !strings.Contains(stderr, args[0]+" must ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", args, code, stderr, args[0])
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%q: the refused command left %v", args, left)
		}
	}
}
