package merge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idem/backend"
)

// A Change is what [Apply] did to one record.
type Change[T any] struct {
	// Before is the record as read; the zero T when Created.
	Before T
	// After is the record as it now stands in the transaction.
	After T
	// Created reports that no live record was there and After was created.
	Created bool
	// Changed reports that Apply wrote: After differs from Before (always
	// true when Created).
	Changed bool
	// Summary is one sentence saying what moved, for the caller: from the
	// [Options].Describe when given, else a list of the JSON fields that
	// changed. "created" and "unchanged" when nothing else applies.
	Summary string
}

// Options change how [Apply] works for records of type T. A nil *Options
// means none of them.
type Options[T any] struct {
	// Describe, when set, summarises a change: it is called only when the
	// record existed and changed, with the record before and after, and
	// returns one sentence ("shortened: end moved from 14:20 to 14:05").
	Describe func(before, after T) string

	// ExpiresAt, when not zero, makes the record Apply writes expire then:
	// from then on it reads as absent, and the next Apply creates it anew.
	// The zero value writes a record that does not expire.
	ExpiresAt time.Time
}

// Apply joins incoming into the record at key, inside tx:
//
//   - no live record at key: it creates rule(incoming, incoming) (which is
//     incoming for a record the rule could have produced) with Create, so a
//     concurrent creator makes the transaction conflict instead of being
//     overwritten;
//   - otherwise it reads the record, joins it with incoming, and writes the
//     result with Update at the version it read, only if its JSON encoding
//     differs from that of the record read. An unchanged record is not
//     written, so its version stays.
//
// A concurrent writer that got there first surfaces as an error wrapping
// [idem.ErrConflict], on which [idem.Store.Run] calls fn again: call Apply
// inside Run, and a retried Apply reads the newer record and joins again, so
// no attempt is lost. Because rule is a join, the record ends the same
// whatever order attempts arrive in.
//
// Errors from tx are returned wrapped (errors.Is finds the idem sentinels);
// a record that does not decode into T is an error and nothing is written.
func Apply[T any](ctx context.Context, tx idem.Tx, key idem.Key, incoming T, rule Rule[T], opts *Options[T]) (Change[T], error) {
	var ch Change[T]
	if tx == nil {
		return ch, errors.New("merge: Apply: tx is nil")
	}
	if rule == nil {
		return ch, errors.New("merge: Apply: rule is nil")
	}
	var o Options[T]
	if opts != nil {
		o = *opts
	}
	var write []backend.WriteOption
	if !o.ExpiresAt.IsZero() {
		write = append(write, backend.WithExpiry(o.ExpiresAt))
	}
	var before T
	v, err := tx.Get(ctx, key, &before)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		after := rule(incoming, incoming)
		if err := tx.Create(ctx, key, after, write...); err != nil {
			if errors.Is(err, idem.ErrExists) {
				return ch, fmt.Errorf("merge: %s was created concurrently: %w", key.Collection, idem.ErrConflict)
			}
			return ch, fmt.Errorf("merge: creating record: %w", err)
		}
		return Change[T]{After: after, Created: true, Changed: true, Summary: "created"}, nil
	case err != nil:
		return ch, fmt.Errorf("merge: reading record: %w", err)
	}
	after := rule(before, incoming)
	jb, err := json.Marshal(before)
	if err != nil {
		return ch, fmt.Errorf("merge: encoding record read: %w", err)
	}
	ja, err := json.Marshal(after)
	if err != nil {
		return ch, fmt.Errorf("merge: encoding merged record: %w", err)
	}
	ch = Change[T]{Before: before, After: after}
	if bytes.Equal(jb, ja) {
		ch.Summary = "unchanged"
		return ch, nil
	}
	if err := tx.Update(ctx, key, v, after, write...); err != nil {
		if errors.Is(err, idem.ErrNotFound) {
			return Change[T]{}, fmt.Errorf("merge: %s was deleted concurrently: %w", key.Collection, idem.ErrConflict)
		}
		return Change[T]{}, fmt.Errorf("merge: writing merged record: %w", err)
	}
	ch.Changed = true
	if o.Describe != nil {
		ch.Summary = o.Describe(before, after)
	} else {
		ch.Summary = diffFields(jb, ja)
	}
	return ch, nil
}

// diffFields names the top-level JSON fields that differ between two
// encodings, or says the value changed when they are not objects.
func diffFields(before, after []byte) string {
	var b, a map[string]json.RawMessage
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil || b == nil || a == nil {
		return "changed"
	}
	var names []string
	for k, av := range a {
		if bv, ok := b[k]; !ok || !bytes.Equal(bv, av) {
			names = append(names, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return "changed: " + strings.Join(names, ", ")
}
