//go:build unix

package storebench

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time the process has used, in user and kernel
// mode, its garbage collector's included.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
