//go:build !linux

package crashtest_test

import "syscall"

// serverAttr is nil where a child cannot be told to die with its parent:
// startServer's cleanup kills it when the test ends.
func serverAttr() *syscall.SysProcAttr { return nil }
