package sideeffect

import (
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem"
)

// Default values of [Options].
const (
	// DefaultLease is how long a claim owns a marker before it counts as
	// abandoned.
	DefaultLease = time.Minute
	// DefaultWait is how long Once waits for another caller's claim to
	// finish before it returns ErrInFlight.
	DefaultWait = 5 * time.Second
)

// MinLease is the shortest lease accepted: a tenth of it is the margin
// before and the grace after LeaseUntil.
const MinLease = 10 * time.Millisecond

// Options configure [New]. The zero value of each field means its default.
// Every process that shares a store should use the same Lease and clocks
// that agree, since a claim stored by one is judged by the others.
type Options struct {
	// Lease is how long a claim owns a marker (default [DefaultLease]):
	// the claim stores LeaseUntil, the claim's time on the Clock plus the
	// lease. The post runs under a context whose deadline is a tenth of
	// the lease before LeaseUntil (measured from the Clock when the post
	// starts; a claim with less time left than that is released without
	// posting). A claim counts as abandoned only a tenth of the lease after
	// LeaseUntil (measured with the reader's lease); then nobody posts
	// again until [Effects.Recover] has reconciled it. So an owner's post
	// has ended at least a fifth of the lease before anyone else may take
	// over, which also absorbs clock skew between processes. Choose a lease
	// longer than any post can take; one shorter than [MinLease] makes New
	// panic.
	Lease time.Duration

	// Wait is how long Once waits, polling, for a marker claimed by
	// another caller to be completed (default [DefaultWait]). A negative
	// Wait means do not wait: return ErrInFlight at once.
	Wait time.Duration

	// Clock is the clock claims and leases are measured with (default
	// time.Now).
	Clock func() time.Time
}

// Effects makes outbound effects happen once, with markers stored in one
// store. Make one with [New] when the server starts and share it; it is
// safe for concurrent use.
type Effects struct {
	s   idem.Store
	cfg config
}

type config struct {
	now   func() time.Time
	lease time.Duration
	wait  time.Duration
}

// New returns the Effects whose markers live in s, configured by opts (nil
// for the defaults). It panics if s is nil or opts.Lease is below
// [MinLease] (a negative one included): both are mistakes in the server's
// code, not in a call.
func New(s idem.Store, opts *Options) *Effects {
	if s == nil {
		panic("sideeffect: New with a nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	c := config{now: o.Clock, lease: o.Lease, wait: o.Wait}
	if c.now == nil {
		c.now = time.Now
	}
	switch {
	case c.lease == 0:
		c.lease = DefaultLease
	case c.lease < MinLease:
		panic(fmt.Sprintf("sideeffect: Options.Lease is %v, below MinLease (%v)", c.lease, MinLease))
	}
	switch {
	case c.wait == 0:
		c.wait = DefaultWait
	case c.wait < 0:
		c.wait = 0
	}
	return &Effects{s: s, cfg: c}
}

// margin is how long before LeaseUntil the owner's post must end.
func (c config) margin() time.Duration { return c.lease / 10 }

// grace is how long after LeaseUntil a claim still counts as live.
func (c config) grace() time.Duration { return c.lease / 10 }
