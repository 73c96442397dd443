package idem

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
)

var (
	attemptPrefix = strconv.FormatUint(rand.Uint64(), 36) // this process
	attemptSeq    atomic.Uint64
)

// newAttemptID returns an id no other attempt, in this process or another,
// has: a random per-process prefix and a counter.
func newAttemptID() string {
	return attemptPrefix + "." + strconv.FormatUint(attemptSeq.Add(1), 36)
}
