package sideeffect

import (
	"errors"

	"github.com/idemkit/sdk/idem"
)

// The errors of this package. Each is matched with errors.Is; none of their
// messages holds a marker key or a payload.
var (
	// ErrNoMarker: no marker exists for the key (Intend never committed,
	// or its transaction rolled back). Nothing was posted. It wraps
	// idem.ErrNotFound.
	ErrNoMarker = wrapSentinel("sideeffect: no marker for this key", idem.ErrNotFound)

	// ErrInFlight: another caller holds a live claim on the marker and did
	// not finish within the wait. Nothing was posted by this call; call
	// again later to learn the reference.
	ErrInFlight = errors.New("sideeffect: effect is being posted by another caller")

	// ErrUnknown: a claim on the marker ended without a recorded outcome
	// (its lease expired, the post panicked, or the post reported that its
	// outcome is unknown). The effect may or may not have happened, so
	// nothing is posted until [Effects.Recover] asks its reconcile function.
	ErrUnknown = errors.New("sideeffect: outcome of an earlier post is unknown; reconcile with Recover")

	// ErrFenced: a complete or release came from a claim that no longer
	// owns the marker (its lease expired and another owner took over). The
	// marker was not changed.
	ErrFenced = errors.New("sideeffect: claim no longer owns the marker")

	// ErrPayloadMismatch: Intend found a marker for the key with a
	// different payload. A marker key names one effect; use a new key for a
	// new effect. It wraps idem.ErrExists.
	ErrPayloadMismatch = wrapSentinel("sideeffect: marker key already used for a different payload", idem.ErrExists)

	// ErrNoTransaction: [Effects.PostAfterCommit] was called with a context that is not
	// inside a transaction of idem.Run or the middleware. Nothing was
	// arranged.
	ErrNoTransaction = errors.New("sideeffect: no idemkit transaction in context")
)

// sentinel is an error with a fixed message that also matches another
// sentinel under errors.Is.
type sentinel struct {
	msg  string
	base error
}

func wrapSentinel(msg string, base error) error { return &sentinel{msg: msg, base: base} }

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }
