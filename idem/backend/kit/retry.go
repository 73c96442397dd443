package kit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemkit/sdk/idem/backend"
)

// Next is what [Retry.Do] does after an attempt that failed.
type Next int

const (
	// Stop returns the attempt's error.
	Stop Next = iota
	// Again runs another attempt after a backoff, so that contending
	// retries spread out.
	Again
	// AgainNow runs another attempt at once: the failure was no contention
	// to wait out (a Create at commit that found a live document, which
	// the next attempt reads).
	AgainNow
)

// OnConflict is the rule of [backend.Store.Run]: Again for an error wrapping
// backend.ErrConflict, Stop for any other.
func OnConflict(err error) Next {
	if errors.Is(err, backend.ErrConflict) {
		return Again
	}
	return Stop
}

// Retry is how a store's Run retries: at most MaxAttempts attempts, the
// n-th retry after a random wait up to Base<<n, at most Cap.
type Retry struct {
	// Store names the store in Do's errors ("memory").
	Store       string
	MaxAttempts int
	Base, Cap   time.Duration
}

// Do calls attempt until it returns nil (Do returns nil), or next says Stop
// for its error (Do returns that error). After MaxAttempts failed attempts it
// returns an error wrapping backend.ErrConflict and the last attempt's
// error. If ctx ends during a backoff, it returns an error wrapping ctx's
// error and the last attempt's.
//
// next sees every error attempt returns; it may keep count (to retry a kind
// of error only once, say).
func (r Retry) Do(ctx context.Context, attempt func() error, next func(error) Next) error {
	var err error
	wait := false
	for n := range r.MaxAttempts {
		if wait {
			if berr := backoff(ctx, n, r.Base, r.Cap); berr != nil {
				return fmt.Errorf("%s: %w (after: %w)", r.Store, berr, err)
			}
		}
		if err = attempt(); err == nil {
			return nil
		}
		switch next(err) {
		case Stop:
			return err
		case Again:
			wait = true
		case AgainNow:
			wait = false
		}
	}
	if !errors.Is(err, backend.ErrConflict) {
		err = fmt.Errorf("%w: %w", backend.ErrConflict, err)
	}
	return fmt.Errorf("%s: gave up after %d attempts: %w", r.Store, r.MaxAttempts, err)
}

// backoff waits before retry number n (1 for the first): a random time up
// to base<<n, capped at max. It returns ctx's error if ctx ends first.
func backoff(ctx context.Context, n int, base, max time.Duration) error {
	limit := min(base<<min(n, 16), max)
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
