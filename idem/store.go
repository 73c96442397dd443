package idem

import "github.com/idemkit/sdk/idem/backend"

// Store runs transactions over JSON documents: store/memory, store/sqlite,
// store/postgres, store/dynamo and store/firestore implement it, and
// store/storetest checks them. Run calls fn in one serializable
// transaction, commits when fn returns nil, and calls fn again (a bounded
// number of times) when the commit loses to a concurrent transaction, so fn
// must have no effect outside its Tx. See [backend.Store] for the whole
// contract.
type Store = backend.Store

// Tx is one transaction on a [Store]: Get, Create (create-if-absent), Put
// (replace-by-key), Update (only if still at a version), Delete, and As for
// the backend's native handle. See [backend.Tx].
type Tx = backend.Tx

// A Key names one document: an optional owner (a user or tenant), a
// collection and an id. See [backend.Key] for the characters each may hold.
type Key = backend.Key

// A Version identifies one committed state of a document; 0 means absent.
type Version = backend.Version

// The errors a [Tx] and [Store.Run] report; test them with errors.Is.
var (
	// ErrNotFound: no live document at the key.
	ErrNotFound = backend.ErrNotFound
	// ErrExists: Create found a live document at the key.
	ErrExists = backend.ErrExists
	// ErrConflict: a conditional write lost, or the transaction lost to a
	// concurrent one. Run retries fn on it.
	ErrConflict = backend.ErrConflict
	// ErrTooLarge: a document or a transaction is over the backend's limit.
	// Nothing was written.
	ErrTooLarge = backend.ErrTooLarge
	// ErrUnknownOutcome: the commit may or may not have been applied.
	ErrUnknownOutcome = backend.ErrUnknownOutcome
)
