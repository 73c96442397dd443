package sideeffect

import (
	"errors"
	"time"
)

// Default values of the options.
const (
	// DefaultLease is how long a claim owns a marker before it counts as
	// abandoned.
	DefaultLease = time.Minute
	// DefaultWait is how long Once waits for another caller's claim to
	// finish before it returns ErrInFlight.
	DefaultWait = 5 * time.Second
)

// An Option changes how a call of this package behaves. Options are made
// only by the functions of this package.
type Option func(*config)

type config struct {
	now   func() time.Time
	lease time.Duration
	wait  time.Duration
}

// Clock sets the clock that claims and leases are measured with. Default
// time.Now. Every process sharing a store should use clocks that agree.
func Clock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// MinLease is the shortest lease accepted: a tenth of it is the margin
// before and the grace after LeaseUntil.
const MinLease = 10 * time.Millisecond

// Lease sets how long a claim owns a marker (default [DefaultLease]): the
// claim stores LeaseUntil, the claim's time on the [Clock] plus the lease.
// The post runs under a context whose deadline is a tenth of the lease
// before LeaseUntil (measured from the Clock when the post starts; a claim
// with less time left than that is released without posting). A claim counts
// as abandoned only a tenth of the lease after LeaseUntil (measured with the
// reader's lease); then nobody posts again until [Recover] has reconciled
// it. So an owner's post has ended at least a fifth of the lease before
// anyone else may take over, which also absorbs clock skew between
// processes. Choose a lease longer than any post can take. A lease shorter
// than [MinLease] is an error.
func Lease(d time.Duration) Option {
	return func(c *config) { c.lease = d }
}

// Wait sets how long Once waits, polling, for a marker claimed by another
// caller to be completed (default [DefaultWait]). Zero means do not wait:
// return ErrInFlight at once. A negative wait is an error.
func Wait(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

var (
	errLease = errors.New("sideeffect: lease must be at least 10ms")
	errWait  = errors.New("sideeffect: wait must not be negative")
)

// margin is how long before LeaseUntil the owner's post must end.
func (c config) margin() time.Duration { return c.lease / 10 }

// grace is how long after LeaseUntil a claim still counts as live.
func (c config) grace() time.Duration { return c.lease / 10 }

func newConfig(opts []Option) (config, error) {
	c := config{now: time.Now, lease: DefaultLease, wait: DefaultWait}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.lease < MinLease {
		return c, errLease
	}
	if c.wait < 0 {
		return c, errWait
	}
	return c, nil
}
