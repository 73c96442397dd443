package sideeffect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/sdk/idem"
)

// A State is where a marker is in its life:
//
//	pending -> claimed(token, lease) -> done(ref)
//	claimed -> pending    (the post failed; the attempt is counted)
//	claimed -> unknown    (the lease expired, or the post's outcome is unknown)
//	unknown -> done       (reconciled as committed)
//	unknown -> claimed    (reconciled as not committed, and posted again)
type State string

// The states of a marker.
const (
	// Pending: the effect is intended and nobody is posting it.
	Pending State = "pending"
	// Claimed: one caller owns the marker until its lease ends and is
	// posting the effect.
	Claimed State = "claimed"
	// Done: the effect happened; the marker holds its external reference.
	Done State = "done"
	// Unknown: a claim ended without a recorded outcome. Nothing posts it
	// until [Effects.Recover]'s reconcile function has said what happened.
	Unknown State = "unknown"
)

// Marker is a snapshot of one marker, as [Effects.Get], [Effects.List] and a
// [ReconcileFunc] see it.
type Marker struct {
	// Key is the marker key given to Intend.
	Key string
	// State is the marker's state at the time of reading; a claim whose
	// lease has expired (a grace of a tenth of the reader's lease after
	// LeaseUntil) reads as Unknown.
	State State
	// Payload is the JSON encoding of the payload given to Intend.
	Payload json.RawMessage
	// Ref is the external reference of a Done marker (for example the
	// post's URI), as returned by the post or by reconcile.
	Ref string
	// Attempts counts the claims made on the marker; Failures counts the
	// posts that failed and released the marker back to Pending.
	Attempts, Failures int
	// LeaseUntil is when the current or last claim's lease ends (zero for
	// a marker that is not Claimed or Unknown).
	LeaseUntil time.Time
	// CreatedAt is when Intend wrote the marker; UpdatedAt when it last
	// changed, on the clock of the caller that changed it.
	CreatedAt, UpdatedAt time.Time
}

// markerCollection holds one document per marker, keyed by the marker key.
const markerCollection = "idem_markers"

// doc is the stored form of a marker.
type doc struct {
	State       State           `json:"state"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Fingerprint string          `json:"fp"`
	Token       string          `json:"token,omitempty"`
	LeaseUntil  time.Time       `json:"lease_until,omitzero"`
	Ref         string          `json:"ref,omitempty"`
	Attempts    int             `json:"attempts,omitempty"`
	Failures    int             `json:"failures,omitempty"`
	// IndexPage is the page of the open-marker index that holds the key
	// while the marker is open (see index.go); 0 if none.
	IndexPage int       `json:"ix_page,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// effective is the state a reader should act on: a claim whose lease has
// ended (grace after LeaseUntil) is Unknown, because its owner may or may not
// have posted.
func (d *doc) effective(now time.Time, grace time.Duration) State {
	if d.State == Claimed && !d.LeaseUntil.Add(grace).After(now) {
		return Unknown
	}
	return d.State
}

func (d *doc) marker(key string, now time.Time, grace time.Duration) Marker {
	return Marker{
		Key:        key,
		State:      d.effective(now, grace),
		Payload:    d.Payload,
		Ref:        d.Ref,
		Attempts:   d.Attempts,
		Failures:   d.Failures,
		LeaseUntil: d.LeaseUntil,
		CreatedAt:  d.CreatedAt,
		UpdatedAt:  d.UpdatedAt,
	}
}

var errNilPost = errors.New("sideeffect: post function is nil")

// markerKey returns the store key of a marker, or an error wrapping
// backend.ErrInvalidKey that does not repeat the key.
func markerKey(key string) (idem.Key, error) {
	k := idem.Key{Collection: markerCollection, ID: key}
	if err := k.Validate(); err != nil {
		return k, fmt.Errorf("sideeffect: marker key: %w", err)
	}
	return k, nil
}

// load reads the marker at k; an absent marker is ErrNoMarker.
func load(ctx context.Context, tx idem.Tx, k idem.Key) (doc, idem.Version, error) {
	var d doc
	v, err := tx.Get(ctx, k, &d)
	if errors.Is(err, idem.ErrNotFound) {
		return d, 0, ErrNoMarker
	}
	if err != nil {
		return d, 0, fmt.Errorf("sideeffect: reading marker: %w", err)
	}
	return d, v, nil
}

func fingerprint(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// newToken returns an unguessable claim token.
func newToken() string {
	return rand.Text()
}

// Get returns the marker for key. It returns an error wrapping
// [ErrNoMarker] if there is none.
func (e *Effects) Get(ctx context.Context, key string) (Marker, error) {
	k, err := markerKey(key)
	if err != nil {
		return Marker{}, err
	}
	var m Marker
	err = e.s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		d, _, err := load(ctx, tx, k)
		if err != nil {
			return err
		}
		m = d.marker(key, e.cfg.now(), e.cfg.grace())
		return nil
	})
	if err != nil {
		return Marker{}, err
	}
	return m, nil
}
