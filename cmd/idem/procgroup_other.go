//go:build !unix

package main

import (
	"os/exec"
	"time"
)

// startInGroup does nothing here: only the command itself is ended.
func startInGroup(cmd *exec.Cmd) {}

// endGroup does nothing here: the transport ends the command.
func endGroup(cmd *exec.Cmd, grace time.Duration) {}
