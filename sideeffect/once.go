package sideeffect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemkit/sdk/idem"
)

// A PostFunc performs one outbound effect: a post, a webhook, an email, a
// payment. key is the marker key; send it as the outbound idempotency key
// where the target accepts one, so that even a post repeated after an
// unknown outcome lands once. payload is what Intend stored.
//
// Return the external reference of what was created (a URI, a message id;
// it may be empty). Return an error only when the effect did not happen: the
// marker is then released and posted again later. If the outcome cannot be
// known (a timeout after the request was sent), return an error wrapping
// idem.ErrUnknownOutcome or [ErrUnknown]: the marker then waits for
// reconciliation instead of being posted again. A timeout (an error
// wrapping context.DeadlineExceeded, or one whose Timeout method reports
// true, as net/http's do) and a cancellation after ctx ended count as
// unknown too, since the request may have gone out.
type PostFunc func(ctx context.Context, key string, payload json.RawMessage) (ref string, err error)

// Once makes the effect named key happen at most once and returns its
// external reference. The marker must exist (see [Effects.Intend]); otherwise Once
// returns an error wrapping [ErrNoMarker] and posts nothing.
//
//   - Pending: Once claims the marker with a conditional write, calls post
//     with no store transaction open, and records done(ref). If post
//     fails, the marker is released to Pending and the post's error is
//     returned (wrapped); a later Once or Recover posts again.
//   - Done: Once returns the stored reference without posting.
//   - Claimed by another caller: Once does not post; it polls until the
//     marker is done (returning its reference) for up to [Options].Wait,
//     then returns an error wrapping [ErrInFlight]. If the other caller
//     released the marker meanwhile, Once claims it and posts.
//   - Unknown, or claimed under an expired lease: Once returns an error
//     wrapping [ErrUnknown] and posts nothing; [Effects.Recover] settles it.
//
// post runs under a context cancelled a tenth of the lease before the
// claim's stored lease ends (see [Options].Lease). If the
// claim was taken over meanwhile (its lease expired and Recover claimed the
// marker), recording the outcome fails with an error wrapping [ErrFenced]
// and changes nothing. A panic in post is returned as an error and leaves
// the marker Unknown, since the effect may have happened.
func (e *Effects) Once(ctx context.Context, key string, post PostFunc) (string, error) {
	k, err := markerKey(key)
	if err != nil {
		return "", err
	}
	if post == nil {
		return "", errNilPost
	}
	return once(ctx, e.s, k, post, e.cfg)
}

func once(ctx context.Context, s idem.Store, k idem.Key, post PostFunc, cfg config) (string, error) {
	deadline := time.Now().Add(cfg.wait)
	delay := 2 * time.Millisecond
	for {
		c, seen, now, err := takeClaim(ctx, s, k, cfg, false, claimPending)
		if err != nil {
			return "", err
		}
		if c != nil {
			return c.post(ctx, post)
		}
		switch seen.effective(now, cfg.grace()) {
		case Done:
			return seen.Ref, nil
		case Unknown:
			return "", ErrUnknown
		}
		left := time.Until(deadline)
		if left <= 0 {
			return "", ErrInFlight
		}
		if err := sleep(ctx, min(delay, left)); err != nil {
			return "", err
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// claimPending lets a claim take only a Pending marker.
func claimPending(d *doc, now time.Time, grace time.Duration) bool { return d.State == Pending }

// A claim is ownership of one marker, proven by its token.
type claim struct {
	s       idem.Store
	k       idem.Key
	token   string
	payload json.RawMessage
	// leaseUntil is the LeaseUntil stored with the claim.
	leaseUntil time.Time
	cfg        config
}

// takeClaim takes the marker at k if may allows it, in one transaction: the
// marker is read and then rewritten conditionally on the version read, so of
// concurrent claimers exactly one wins. It returns the claim, or nil and the
// marker as it was seen, and the time on cfg's clock at which it read the
// marker (the claim's own time). With markExpired, a marker it does not claim
// that is Claimed under an expired lease is recorded Unknown in the same
// transaction.
func takeClaim(ctx context.Context, s idem.Store, k idem.Key, cfg config, markExpired bool, may func(d *doc, now time.Time, grace time.Duration) bool) (*claim, doc, time.Time, error) {
	token := newToken()
	var (
		c    *claim
		seen doc
		now  time.Time
	)
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		c = nil
		d, v, err := load(ctx, tx, k)
		if err != nil {
			return err
		}
		seen = d
		now = cfg.now()
		if !may(&d, now, cfg.grace()) {
			if markExpired && d.State == Claimed && d.effective(now, cfg.grace()) == Unknown {
				d.State = Unknown
				d.UpdatedAt = now
				if err := tx.Update(ctx, k, v, d); err != nil {
					return fmt.Errorf("sideeffect: recording unknown outcome of marker: %w", err)
				}
				seen = d
			}
			return nil
		}
		d.State = Claimed
		d.Token = token
		d.LeaseUntil = now.Add(cfg.lease)
		d.Attempts++
		d.UpdatedAt = now
		if err := tx.Update(ctx, k, v, d); err != nil {
			return fmt.Errorf("sideeffect: claiming marker: %w", err)
		}
		c = &claim{s: s, k: k, token: token, payload: d.Payload, leaseUntil: d.LeaseUntil, cfg: cfg}
		return nil
	})
	if err != nil {
		return nil, doc{}, time.Time{}, err
	}
	return c, seen, now, nil
}

var errLeaseUsed = errors.New("sideeffect: the claim's lease ran out before the post could start; marker released, nothing posted")

// post calls post for the claim and records the outcome: done, released or
// unknown. The outcome is recorded even if ctx was cancelled meanwhile.
//
// The post's deadline is tied to the stored lease, on the same clock: it
// ends margin before leaseUntil, however long the claim's commit took, and
// never later than the lease from now. A claim with less than margin left
// is released without posting.
func (c *claim) post(ctx context.Context, post PostFunc) (string, error) {
	wctx := context.WithoutCancel(ctx)
	// Bounded by the lease too: a clock without a monotonic reading (one
	// made with UTC(), say) that steps back must not stretch the post past
	// the takeover time other processes compute.
	left := min(c.leaseUntil.Add(-c.cfg.margin()).Sub(c.cfg.now()), c.cfg.lease-c.cfg.margin())
	if left < c.cfg.margin() {
		// Too little time for a post to finish: one that started now
		// would most likely be cut short and leave the marker unknown.
		if err := c.fenced(wctx, "releasing", unclaim); err != nil {
			return "", errors.Join(errLeaseUsed, err)
		}
		return "", errLeaseUsed
	}
	pctx, cancel := context.WithTimeout(ctx, left)
	ref, perr := callPost(pctx, post, c.k.ID, c.payload)
	cutShort := cutShort(pctx, perr)
	cancel()
	switch {
	case perr == nil:
		if err := c.complete(wctx, ref); err != nil {
			return "", err
		}
		return ref, nil
	case cutShort || errors.Is(perr, idem.ErrUnknownOutcome) || errors.Is(perr, ErrUnknown) || errors.Is(perr, errPanic):
		err := fmt.Errorf("%w: %w", ErrUnknown, perr)
		if uerr := c.markUnknown(wctx); uerr != nil {
			return "", errors.Join(err, uerr)
		}
		return "", err
	default:
		err := fmt.Errorf("sideeffect: post failed, marker released for a later attempt: %w", perr)
		if rerr := c.release(wctx); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		return "", err
	}
}

// cutShort reports whether a post gave up before it heard back: a timeout
// of its own (an HTTP client's, a net.Error's), or its context ending (the
// lease ran out, or the caller went away). Such a post may have sent its
// request already, so its outcome is unknown, not a failure.
func cutShort(pctx context.Context, perr error) bool {
	if perr == nil {
		return false
	}
	if errors.Is(perr, context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	if errors.As(perr, &te) && te.Timeout() {
		return true
	}
	return pctx.Err() != nil && errors.Is(perr, context.Canceled)
}

var errPanic = errors.New("sideeffect: post panicked")

// callPost calls post, turning a panic into an error that counts as an
// unknown outcome.
func callPost(ctx context.Context, post PostFunc, key string, payload json.RawMessage) (ref string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", errPanic, r, debug.Stack())
		}
	}()
	return post(ctx, key, payload)
}

// complete records done(ref), only while the claim still owns the marker.
func (c *claim) complete(ctx context.Context, ref string) error {
	return c.fenced(ctx, "completing", func(d *doc) {
		d.State = Done
		d.Ref = ref
		d.Token = ""
		d.LeaseUntil = time.Time{}
	})
}

// release returns the marker to Pending, counting the failure, only while
// the claim still owns it.
func (c *claim) release(ctx context.Context) error {
	return c.fenced(ctx, "releasing", func(d *doc) {
		unclaim(d)
		d.Failures++
	})
}

// unclaim returns a marker to Pending.
func unclaim(d *doc) {
	d.State = Pending
	d.Token = ""
	d.LeaseUntil = time.Time{}
}

// markUnknown records that the claim's outcome is unknown, only while the
// claim still owns the marker. The token stays, so that the owner can still
// complete if it learns the outcome, until someone else takes over.
func (c *claim) markUnknown(ctx context.Context) error {
	return c.fenced(ctx, "recording unknown outcome of", func(d *doc) {
		d.State = Unknown
	})
}

// fenced applies change to the marker in one transaction if the marker is
// still Claimed or Unknown under this claim's token; otherwise it returns
// ErrFenced and writes nothing.
func (c *claim) fenced(ctx context.Context, what string, change func(d *doc)) error {
	return c.s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		d, v, err := load(ctx, tx, c.k)
		if errors.Is(err, ErrNoMarker) {
			return fmt.Errorf("%w (%s marker)", ErrFenced, what)
		}
		if err != nil {
			return err
		}
		if d.Token != c.token || (d.State != Claimed && d.State != Unknown) {
			return fmt.Errorf("%w (%s marker)", ErrFenced, what)
		}
		page := d.IndexPage
		change(&d)
		if d.State == Done {
			d.IndexPage = 0
		}
		d.UpdatedAt = c.cfg.now()
		if err := tx.Update(ctx, c.k, v, d); err != nil {
			return fmt.Errorf("sideeffect: %s marker: %w", what, err)
		}
		if d.State == Done {
			return indexRemove(ctx, tx, c.k.ID, page)
		}
		return nil
	})
}

// PostAfterCommit arranges for [Effects.Once] to run for key once the transaction ctx
// belongs to has committed (see idem.AfterCommit): after a real commit
// only, never on rollback and never when the middleware answers a replay.
// Call it in a tool handler right after [Effects.Intend], with the handler's ctx.
//
// The key and post are checked now, so a bad one fails the
// handler (and rolls its transaction back) rather than the hook. then, if
// not nil, receives Once's result; a post that fails after the commit leaves
// its marker Pending (or Unknown) for [Effects.Recover]. The hook runs on the
// committing goroutine, so the middleware sends the tool's response after
// the post; to post in the background, call Once from a goroutine of your
// own idem.AfterCommit hook. PostAfterCommit returns [ErrNoTransaction] if ctx
// is not inside a transaction of idem.Run or the middleware.
func (e *Effects) PostAfterCommit(ctx context.Context, key string, post PostFunc, then func(ref string, err error)) error {
	k, err := markerKey(key)
	if err != nil {
		return err
	}
	if post == nil {
		return errNilPost
	}
	if !idem.AfterCommit(ctx, func(ctx context.Context) {
		ref, err := once(ctx, e.s, k, post, e.cfg)
		if then != nil {
			then(ref, err)
		}
	}) {
		return ErrNoTransaction
	}
	return nil
}
