//go:build !unix

package storebench

import "time"

// ProcessCPU is not measured here: CallsAlone reports no CPU time.
func ProcessCPU() time.Duration { return 0 }
