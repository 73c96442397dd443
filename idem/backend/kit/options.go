// Package kit is what idemkit's stores are built from, so that a backend is
// a thin adapter over its database: the options every store takes and one
// rule for their defaults ([Options.Resolve]), the checks every Tx method
// makes before it touches the store ([Gate]), the retry loop of Run with its
// backoff ([Retry]), a transaction that reads through the backend and
// buffers its writes until the commit ([Buffer]), which the memory,
// DynamoDB and Firestore stores build on, the Tx of a read-only
// transaction, whose writes fail ([ReadOnly]), and the background sweep of
// the stores that sweep ([StartSweeping]).
//
// Package backend is the contract a store implements; kit is one way to
// implement it, and imports no database.
//
//	func (s *Store) Run(ctx context.Context, fn func(context.Context, backend.Tx) error) error {
//		return s.retry.Do(ctx, func() error { return s.attempt(ctx, fn) }, kit.OnConflict)
//	}
package kit

import (
	"fmt"
	"time"
)

// Options are the options every store takes. A store's own Options struct
// has these fields under the same names, and resolves them with
// [Options.Resolve].
type Options struct {
	// Now is the store's clock, which decides whether a document has
	// expired.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts.
	MaxDocumentBytes int
	// MaxAttempts bounds how many times Run calls fn.
	MaxAttempts int
}

// Resolve returns o with every zero field set to def's. A negative
// MaxDocumentBytes or MaxAttempts is refused with an error that names the
// field; store names the store in it ("memory").
func (o Options) Resolve(store string, def Options) (Options, error) {
	var err error
	if o.Now == nil {
		o.Now = def.Now
	}
	if o.MaxDocumentBytes, err = Default(store, "MaxDocumentBytes", o.MaxDocumentBytes, def.MaxDocumentBytes); err != nil {
		return Options{}, err
	}
	if o.MaxAttempts, err = Default(store, "MaxAttempts", o.MaxAttempts, def.MaxAttempts); err != nil {
		return Options{}, err
	}
	return o, nil
}

// Default is the rule for a store's numeric options: zero means def, a
// positive value is taken as it is, and a negative one is an error naming
// the option (Options.name of store).
func Default[T ~int | ~int64](store, name string, v, def T) (T, error) {
	switch {
	case v < 0:
		return 0, fmt.Errorf("%s: Options.%s may not be negative (0 means the default)", store, name)
	case v == 0:
		return def, nil
	}
	return v, nil
}
