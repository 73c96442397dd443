//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readPID reads the number a script wrote to file.
func readPID(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if n, aerr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && aerr == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing written to %s", file)
		}
	}
}

// A stdio server is audited in a process group of its own, whose leader is
// the command the audit started: so that ending the group reaches what a
// launcher such as npx started.
func TestStdioServerInItsOwnGroup(t *testing.T) {
	t.Setenv(asServer, "1")
	file := filepath.Join(t.TempDir(), "pgid")
	status, r := auditJSON(t, "--", "sh", "-c", `echo $(ps -o pgid= -p $$) $$ > "$1"; exec "$0"`, os.Args[0], file)
	if status != exitFindings || len(r.Tools) == 0 {
		t.Fatalf("exit status %d, %d tools: the audit did not run", status, len(r.Tools))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != f[1] {
		t.Errorf("the server's process group and pid: %q, want the server to lead its own group", b)
	}
}

// endGroup ends a launcher that is still running and what it started,
// though the launcher ignores SIGTERM.
func TestEndGroupEndsWhatTheCommandStarted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("sh", "-c", `trap "" TERM; sleep 300 & echo $! > "$0"; wait`, file)
	startInGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	child := readPID(t, file)
	endGroup(cmd, 200*time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the launcher still runs")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(child, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the process the launcher started (pid %d) still runs", child)
		}
	}
}
