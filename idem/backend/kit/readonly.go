package kit

import (
	"context"
	"fmt"

	"github.com/idemkit/sdk/idem/backend"
)

// ReadOnly returns fn with a Tx that refuses writes, for a store's
// [backend.ReadOnlyRunner.RunReadOnly]: Create, Put, Update and Delete
// return an error wrapping [backend.ErrReadOnly] before they touch the
// store, so the transaction stays usable; Get and As are the store's own.
// The store still runs fn in a transaction that reads one snapshot and
// never waits for writers, and makes its native handle (As) read-only if
// it hands one out.
//
//	func (s *Store) RunReadOnly(ctx context.Context, fn func(context.Context, backend.Tx) error) error {
//		return s.Run(ctx, kit.ReadOnly(fn)) // a store whose Run never waits, as the memory store's
//	}
func ReadOnly(fn func(ctx context.Context, tx backend.Tx) error) func(ctx context.Context, tx backend.Tx) error {
	return func(ctx context.Context, tx backend.Tx) error {
		return fn(ctx, readOnlyTx{tx})
	}
}

// The errors of the writes a read-only Tx refuses: they name the method,
// never the key, whose id may come from a tool's arguments.
var (
	errCreateReadOnly = fmt.Errorf("%w (Create)", backend.ErrReadOnly)
	errPutReadOnly    = fmt.Errorf("%w (Put)", backend.ErrReadOnly)
	errUpdateReadOnly = fmt.Errorf("%w (Update)", backend.ErrReadOnly)
	errDeleteReadOnly = fmt.Errorf("%w (Delete)", backend.ErrReadOnly)
)

// readOnlyTx is a Tx whose writes fail. It does not embed the Tx, so that
// no write method of the store's can be reached through it.
type readOnlyTx struct{ tx backend.Tx }

func (t readOnlyTx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	return t.tx.Get(ctx, k, dst)
}

func (t readOnlyTx) Create(context.Context, backend.Key, any, ...backend.WriteOption) error {
	return errCreateReadOnly
}

func (t readOnlyTx) Put(context.Context, backend.Key, any, ...backend.WriteOption) error {
	return errPutReadOnly
}

func (t readOnlyTx) Update(context.Context, backend.Key, backend.Version, any, ...backend.WriteOption) error {
	return errUpdateReadOnly
}

func (t readOnlyTx) Delete(context.Context, backend.Key, backend.Version) error {
	return errDeleteReadOnly
}

func (t readOnlyTx) As(target any) bool { return t.tx.As(target) }
