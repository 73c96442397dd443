package sideeffect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem"
)

// An Outcome is what a [ReconcileFunc] learned about an effect whose claim
// ended without a recorded outcome.
type Outcome int

const (
	// CannotTell: external truth cannot tell yet. The marker stays
	// Unknown, listed by List(ctx, Unknown), and nothing is posted. It is
	// the zero value, so a reconcile that says nothing posts nothing.
	CannotTell Outcome = iota
	// Happened: the effect happened. The marker becomes Done with the
	// reference reconcile returns; nothing is posted.
	Happened
	// NotHappened: the effect did not happen. The marker is claimed and
	// posted again, once.
	NotHappened
)

func (o Outcome) String() string {
	switch o {
	case CannotTell:
		return "cannot_tell"
	case Happened:
		return "happened"
	case NotHappened:
		return "not_happened"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// A ReconcileFunc reads external truth (the target's own record, looked up
// by the marker key sent as idempotency key, or by the payload) and says
// whether the effect of m happened. For Happened it returns the effect's
// external reference. An error leaves the marker as it was.
type ReconcileFunc func(ctx context.Context, m Marker) (Outcome, string, error)

// Report says what one [Effects.Recover] run did, by marker key, in key order.
type Report struct {
	// Posted: pending markers, and those reconcile said NotHappened,
	// posted and recorded done.
	Posted []string
	// Reconciled: markers recorded done because reconcile said Happened.
	Reconciled []string
	// Unknown: markers reconcile could not settle (CannotTell); they
	// need a person, and are listed by List(ctx, Unknown).
	Unknown []string
	// Busy: markers another caller was working on (a live claim, or one
	// that moved while Recover looked at it); left alone.
	Busy []string
	// Failed: markers whose post or reconcile failed this run; they stay
	// pending or unknown for the next run.
	Failed []string
}

var (
	errNilReconcile = errors.New("sideeffect: reconcile function is nil")
	errBadOutcome   = errors.New("sideeffect: reconcile returned an undefined outcome")
)

// Recover drives every open marker towards done, one marker at a time:
//
//   - Pending (intended, never posted, or released after a failed post):
//     claimed and posted with post, as [Effects.Once] would.
//   - Claimed under a live lease: left to its owner.
//   - Unknown, or claimed under an expired lease (a tenth of the lease
//     past LeaseUntil, see [Options].Lease): recorded Unknown, then
//     reconcile is asked. Happened records done(ref) without posting;
//     NotHappened claims the marker (fencing out the old owner) and posts
//     once; CannotTell leaves it Unknown, to be asked again next run.
//
// Run it at start-up and then periodically (every lease or so). Concurrent
// Recover runs are safe: each transition is conditional, so no marker is
// posted twice by them. Per-marker failures are in the report and joined in
// the returned error; the other markers are still processed. Recover holds
// no store transaction open while it posts.
func (e *Effects) Recover(ctx context.Context, post PostFunc, reconcile ReconcileFunc) (Report, error) {
	var r Report
	s, cfg := e.s, e.cfg
	if post == nil {
		return r, errNilPost
	}
	if reconcile == nil {
		return r, errNilReconcile
	}
	open, err := readOpen(ctx, s, cfg)
	if err != nil {
		return r, err
	}
	var errs []error
	for _, m := range open {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		list, err := recoverOne(ctx, s, m.Key, post, reconcile, cfg)
		if err != nil {
			errs = append(errs, err)
		}
		switch list {
		case listPosted:
			r.Posted = append(r.Posted, m.Key)
		case listReconciled:
			r.Reconciled = append(r.Reconciled, m.Key)
		case listUnknown:
			r.Unknown = append(r.Unknown, m.Key)
		case listBusy:
			r.Busy = append(r.Busy, m.Key)
		case listFailed:
			r.Failed = append(r.Failed, m.Key)
		}
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("sideeffect: %d of %d open markers failed to recover: %w", len(errs), len(open), errors.Join(errs...))
	}
	return r, nil
}

type list int

const (
	listNone list = iota
	listPosted
	listReconciled
	listUnknown
	listBusy
	listFailed
)

func recoverOne(ctx context.Context, s idem.Store, key string, post PostFunc, reconcile ReconcileFunc, cfg config) (list, error) {
	k, err := markerKey(key)
	if err != nil {
		return listFailed, err
	}
	// Pending: claim and post, as Once does but without waiting. Claimed
	// under an expired lease: record Unknown.
	c, seen, now, err := takeClaim(ctx, s, k, cfg, true, claimPending)
	if errors.Is(err, ErrNoMarker) {
		return listNone, nil
	}
	if err != nil {
		return listFailed, err
	}
	if c != nil {
		return posted(c.post(ctx, post))
	}
	switch seen.effective(now, cfg.grace()) {
	case Done:
		return listNone, nil
	case Claimed:
		return listBusy, nil
	}

	// Unknown: the claim under seen.Token ended without an outcome.
	stale := &claim{s: s, k: k, token: seen.Token, payload: seen.Payload, cfg: cfg}
	m := seen.marker(key, now, cfg.grace())
	outcome, ref, err := reconcile(ctx, m)
	if err != nil {
		return listFailed, fmt.Errorf("sideeffect: reconcile: %w", err)
	}
	switch outcome {
	case CannotTell:
		return listUnknown, nil
	case Happened:
		err := stale.complete(context.WithoutCancel(ctx), ref)
		if errors.Is(err, ErrFenced) {
			return listBusy, nil
		}
		if err != nil {
			return listFailed, err
		}
		return listReconciled, nil
	case NotHappened:
		c, _, _, err := takeClaim(ctx, s, k, cfg, false, func(d *doc, now time.Time, grace time.Duration) bool {
			return d.Token == seen.Token && d.effective(now, grace) == Unknown
		})
		if err != nil {
			return listFailed, err
		}
		if c == nil {
			return listBusy, nil
		}
		return posted(c.post(ctx, post))
	}
	return listFailed, errBadOutcome
}

func posted(_ string, err error) (list, error) {
	if err != nil {
		return listFailed, err
	}
	return listPosted, nil
}
