package sideeffect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/sdk/idem"
)

// Intend records, in tx, that the effect named key should happen once, with
// payload (encoded as JSON) for the post. Call it in the transaction of the
// write the effect belongs to: the marker commits with the write or not at
// all, and a rolled-back transaction leaves no marker.
//
// Intend is idempotent: if a marker for key exists with the same payload, in
// any state, Intend changes nothing and returns nil, so repeating the write
// never re-arms an effect that is done. If the existing marker has a
// different payload, Intend returns an error wrapping [ErrPayloadMismatch]
// (and idem.ErrExists); a key names one effect.
//
// A bad key returns an error wrapping backend.ErrInvalidKey; nothing is
// written.
func (e *Effects) Intend(ctx context.Context, tx idem.Tx, key string, payload any) error {
	k, err := markerKey(key)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("sideeffect: payload is not encodable as JSON: %w", err)
	}
	page, addToIndex, err := indexSlot(ctx, tx, key)
	if err != nil {
		return err
	}
	now := e.cfg.now()
	d := doc{State: Pending, Payload: raw, Fingerprint: fingerprint(raw), IndexPage: page, CreatedAt: now, UpdatedAt: now}
	err = tx.Create(ctx, k, d)
	if errors.Is(err, idem.ErrExists) {
		cur, _, err := load(ctx, tx, k)
		if err != nil {
			return err
		}
		if cur.Fingerprint != d.Fingerprint {
			return ErrPayloadMismatch
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sideeffect: writing marker: %w", err)
	}
	return addToIndex()
}
