package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/sdk/examples/internal/extest"
)

// crashLease is the servers' -lease in the crash test: a claim whose
// process died is in progress until it passes.
const crashLease = 2 * time.Second

// startServer starts the command serving HTTP on a free port with args
// and waits for the URL it serves.
func startServer(t *testing.T, args ...string) *extest.Process {
	t.Helper()
	cmd := exec.Command(trackerBin.Path(t), append([]string{"-http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "TRACKER_TOKEN="+testToken)
	cmd.Dir = t.TempDir()
	return extest.StartHTTP(t, cmd)
}

// TestCrashBetweenUpstreamCallAndAnswer runs the command as a process on a
// SQLite file, against a tracker in this test's process, which kills the
// server with SIGKILL when the create reaches it: after making the issue
// (the effect happened, its answer was never stored) or before (it did
// not). A new process on the same store gets the same call again: it
// waits while the dead call's lease runs, answers unknown_outcome while
// the tracker's search is down, and once the search works, reconcile
// settles it: the issue made is answered, replayed, or the claim is
// released and the issue made once. The tracker never makes two.
func TestCrashBetweenUpstreamCallAndAnswer(t *testing.T) {
	trackerBin.Path(t)
	for _, made := range []bool{true, false} {
		name := map[bool]string{true: "killed after the create", false: "killed before the create"}[made]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			fake := newFakeTracker(testToken, time.Now)
			api := httptest.NewServer(fake)
			defer api.Close()
			db := filepath.Join(t.TempDir(), "tracker.db")
			hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

			args := []string{"-store", "sqlite:" + db, "-api", api.URL, "-lease", crashLease.String()}
			first := startServer(t, args...)
			killed := make(chan error, 1)
			fake.failNext(fault{create: made, status: http.StatusBadGateway, hook: func() { killed <- first.Kill() }})
			call := issueArgs("Crash on start")
			if res, err := callAt(ctx, first.URL, hc, "create_issue", call); err == nil {
				t.Fatalf("the killed server answered: %v", textOf(res))
			}
			select {
			case err := <-killed:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("the create did not reach the tracker")
			}
			var exit *exec.ExitError
			if !errors.As(first.Err(), &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the first server exited with %v, want SIGKILL", first.Err())
			}
			killedAt := time.Now()

			second := startServer(t, args...)
			fake.failSearches(1)
			res, err := callAt(ctx, second.URL, hc, "create_issue", call)
			if err != nil {
				t.Fatal(err)
			}
			waited := time.Since(killedAt)
			if !res.IsError || codeOf(res) != "unknown_outcome" {
				t.Fatalf("repeat with the search down: error %v, code %q, %v; want unknown_outcome", res.IsError, codeOf(res), textOf(res))
			}
			if waited < crashLease/2 {
				t.Fatalf("unknown_outcome %v after the kill: the dead call's claim was not waited for", waited)
			}

			settled, err := callAt(ctx, second.URL, hc, "create_issue", call)
			if err != nil {
				t.Fatal(err)
			}
			is := issueOf(t, settled)
			issues := fake.issues("acme/app")
			if len(issues) != 1 || is != issues[0] || replayed(settled) != made {
				t.Fatalf("settled as %+v (replayed %v), tracker has %+v; want its one issue (replayed: %v)", is, replayed(settled), issues, made)
			}
			again, err := callAt(ctx, second.URL, hc, "create_issue", call)
			if err != nil {
				t.Fatal(err)
			}
			if issueOf(t, again) != issues[0] || !replayed(again) {
				t.Fatalf("the next repeat: %v, want the issue, replayed", textOf(again))
			}

			got := fake.received()
			t.Logf("%s: %d creates received, %d issues made; repeat answered unknown_outcome %v after the kill, then settled (replayed: %v)",
				name, got.IssueCreates, len(fake.issues("acme/app")), waited.Round(10*time.Millisecond), replayed(settled))
			want := map[bool]int{true: 1, false: 2}[made] // not made: the repeat sent it again, once
			if got.IssueCreates != want || len(fake.issues("acme/app")) != 1 {
				t.Fatalf("%d creates received and %d issues made, want %d and 1", got.IssueCreates, len(fake.issues("acme/app")), want)
			}
			// Each process forwards the same key for the operation.
			if keys := fake.idempotencyKeys(); len(keys) != want || keys[0] == "" || keys[len(keys)-1] != keys[0] {
				t.Fatalf("keys %q: want the same key on each create", keys)
			}
		})
	}
}
