//go:build unix

package main

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// startInGroup makes cmd start in a process group of its own, so that
// endGroup reaches what it starts too (npx starts the server as a child).
func startInGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// endGroup ends what is left of cmd's process group once the session is
// closed: SIGTERM, then SIGKILL to what is still there after grace.
func endGroup(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	pgid := -cmd.Process.Pid
	if errors.Is(syscall.Kill(pgid, syscall.SIGTERM), syscall.ESRCH) {
		return
	}
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(pgid, 0), syscall.ESRCH) {
			return
		}
	}
	syscall.Kill(pgid, syscall.SIGKILL)
}
