package crashtest_test

import "syscall"

// serverAttr makes a server die with the test process, so that a test that
// times out or is killed leaves no server behind.
func serverAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
