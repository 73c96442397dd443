// Package backend is the store contract of idemkit, for the authors of
// backends: the Tx and Store interfaces a backend implements, the optional
// capabilities (Reader, ReadOnlyRunner, Sweeper, Expirer), the sentinel
// errors it maps its native errors onto, and helpers that keep every backend
// in agreement (write options, expiry, document encoding). Package kit
// (idem/backend/kit) holds what the stores are built from: the options'
// defaults, the checks of every Tx method, the retry loop of Run and a
// buffered transaction.
//
// Server authors use package idem, which re-exports what a handler needs
// (Store, Tx, Key, Version and the sentinels). A backend's test is a harness
// and one call of store/storetest.Run.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// A Key names one document: an optional owner, a short collection name and
// an id within it.
//
// Owner, when set, is whose document it is (a user or tenant): backends keep
// an owner's documents apart from everyone else's and may store them under
// the owner (Firestore: users/{owner}/{collection}/{id}). Keys that differ
// only in Owner name different documents on every backend. The middleware
// sets it on op records to the caller's scope.
//
// Collection is 1..64 bytes of [a-z0-9_.-]; ID (and Owner, when set) is
// 1..512 bytes of valid UTF-8 without '/' or control characters, so that
// every backend can use them as native keys (a DynamoDB partition key, a
// Firestore document path, a PostgreSQL primary key). Use [Key.Validate] to
// check one.
type Key struct {
	Owner      string
	Collection string
	ID         string
}

// String returns the key as owner/collection/id, or collection/id without an
// owner.
func (k Key) String() string {
	if k.Owner != "" {
		return k.Owner + "/" + k.Collection + "/" + k.ID
	}
	return k.Collection + "/" + k.ID
}

// StoredID returns the id a backend with one key column per collection
// stores k under: owner/id, or id without an owner. Since neither an owner
// nor an id holds '/', two keys never share a stored id.
func (k Key) StoredID() string {
	if k.Owner != "" {
		return k.Owner + "/" + k.ID
	}
	return k.ID
}

// Validate reports whether k is a well-formed key. Every Tx method returns
// this error (wrapping [ErrInvalidKey]) before it touches the store.
func (k Key) Validate() error {
	if n := len(k.Collection); n == 0 || n > 64 {
		return fmt.Errorf("%w: collection must be 1..64 bytes", ErrInvalidKey)
	}
	for i := 0; i < len(k.Collection); i++ {
		c := k.Collection[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%w: collection may hold only [a-z0-9_.-]", ErrInvalidKey)
		}
	}
	if err := validName("id", k.ID); err != nil {
		return err
	}
	if k.Owner != "" {
		return validName("owner", k.Owner)
	}
	return nil
}

func validName(what, s string) error {
	if n := len(s); n == 0 || n > 512 {
		return fmt.Errorf("%w: %s must be 1..512 bytes", ErrInvalidKey, what)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be valid UTF-8", ErrInvalidKey, what)
	}
	for _, r := range s {
		if r == '/' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s may not hold '/' or control characters", ErrInvalidKey, what)
		}
	}
	return nil
}

// A Version identifies one committed state of a document. The zero Version
// means the document is absent. Every write gives the document a version
// greater than any it had before; callers compare versions for equality only.
type Version int64

// Tx is one transaction on a [Store]. It is valid only inside the function
// passed to [Store.Run] and must not be used from other goroutines
// concurrently or after that function returns.
//
// Documents are JSON: doc arguments are marshaled with encoding/json and dst
// arguments unmarshaled with it.
type Tx interface {
	// Get reads the document at k into dst (dst may be nil to learn only the
	// version) and returns its version. A document that is absent, or whose
	// expiry (see [WithExpiry]) is not after the store's clock, reports
	// ErrNotFound and version 0. Get sees this Tx's own earlier writes.
	Get(ctx context.Context, k Key, dst any) (Version, error)

	// Create writes doc at k only if no live document is there: otherwise it
	// returns ErrExists and writes nothing. An expired document counts as
	// absent and is replaced.
	Create(ctx context.Context, k Key, doc any, opts ...WriteOption) error

	// Put writes doc at k whether or not a document is there
	// (replace-by-key).
	Put(ctx context.Context, k Key, doc any, opts ...WriteOption) error

	// Update writes doc at k only if the live document there is still at
	// version v. It returns ErrNotFound if no live document is there and
	// ErrConflict if the document is at another version.
	Update(ctx context.Context, k Key, v Version, doc any, opts ...WriteOption) error

	// Delete removes the document at k. With v == 0 the delete is
	// unconditional; otherwise it returns ErrConflict unless the document is
	// at version v. Deleting an absent document returns ErrNotFound.
	Delete(ctx context.Context, k Key, v Version) error

	// As sets target to the backend's native transaction handle when target
	// is a pointer to its type (for example *pgx.Tx), and reports whether it
	// did. Writes made through the native handle commit or roll back with
	// this Tx.
	As(target any) bool
}

// Store runs transactions over documents. Implementations are safe for
// concurrent use.
type Store interface {
	// Run calls fn in one serializable transaction and commits when fn
	// returns nil. If fn returns an error, nothing fn wrote is kept and Run
	// returns that error.
	//
	// When the commit loses to a concurrent transaction (a document fn read
	// or wrote changed underneath it), or fn returns an error wrapping
	// ErrConflict, Run calls fn again, a bounded number of times; after the
	// last attempt it returns an error wrapping ErrConflict. So fn must have
	// no effect outside tx.
	//
	// If the commit was sent but its outcome cannot be known (a connection
	// lost during COMMIT), Run returns an error wrapping ErrUnknownOutcome:
	// the writes may or may not have been applied.
	Run(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// A Reader is a Store that can read one document outside any transaction,
// seeing the latest committed state, with expiry applied as by Tx.Get. Stores
// implement it when one read costs less than a transaction (one round trip
// where Run needs BEGIN, SELECT and COMMIT). The middleware then lets the
// first attempt of an operation skip reading its op record inside the
// transaction, since the op record's Create (with [CreateAtCommit]) still
// refuses a duplicate; it answers a repeat of an op id it answered lately
// (or every call, with idem.ReadFirst) with one Read before the transaction.
type Reader interface {
	// Read reads the live document at k into dst (dst may be nil) and
	// returns its version, or ErrNotFound.
	Read(ctx context.Context, k Key, dst any) (Version, error)
}

// A ReadOnlyRunner is a Store that can run a transaction that only reads,
// without waiting for the transactions that write. Stores implement it when
// their Run waits for writers or costs more than a read needs: SQLite's Run
// waits for the database's one writer, PostgreSQL's runs at SERIALIZABLE.
// The middleware runs a read-only tool's call without an op id (a tool whose
// annotations say readOnlyHint: true), and get_operation's lookup, in
// RunReadOnly when the store has it, so that a flood of writes does not
// hold up reads.
type ReadOnlyRunner interface {
	// RunReadOnly calls fn in one transaction that reads a consistent
	// snapshot of committed documents, with expiry applied as by Tx.Get,
	// and that never waits for a write transaction to end: a document
	// another transaction has written and not yet committed reads as it
	// was before. It returns fn's error.
	//
	// Every write through tx (Create, Put, Update, Delete) fails with an
	// error wrapping ErrReadOnly, writes nothing and leaves the
	// transaction usable: a later Get works. A write through the native
	// handle of Tx.As fails with the database's own error.
	//
	// Like Run, RunReadOnly may call fn again, a bounded number of times
	// (when fn returns an error wrapping ErrConflict, or, on a store that
	// checks reads when fn returns, when a document fn read changed
	// meanwhile), so fn must have no effect outside tx.
	RunReadOnly(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// A Sweeper deletes expired documents in batches, for backends whose
// storage has no native time-to-live. It returns how many it deleted; a
// result below limit means no expired document was left at the time.
// idemkit's Sweepers also sweep themselves in the background from the
// moment they are opened (see their Options.NoSweep).
type Sweeper interface {
	Sweep(ctx context.Context, limit int) (int, error)
}

// An Expirer is a Store whose database deletes expired documents by itself
// with a native time-to-live (DynamoDB's TTL, a Firestore TTL policy), once
// it is turned on for the field ExpiryField names: it has no Sweep, and no
// process needs to sweep it. Without that time-to-live, expired documents
// are never deleted: they read as absent all the same, and they take
// storage for ever.
type Expirer interface {
	// ExpiryField names the attribute or field that holds a document's
	// expiry, on which the database's time-to-live must be turned on.
	ExpiryField() string
}

// The sentinel errors of the store contract. Backends wrap their native
// errors so that errors.Is finds these and errors.As still finds the native
// one.
var (
	// ErrNotFound: no live document at the key.
	ErrNotFound = errors.New("idem: document not found")
	// ErrExists: Create found a live document at the key.
	ErrExists = errors.New("idem: document already exists")
	// ErrConflict: a conditional write lost, or the transaction lost to a
	// concurrent one. Run retries fn on it.
	ErrConflict = errors.New("idem: version conflict")
	// ErrTooLarge: a document or a transaction is over the backend's limit.
	// Nothing was written.
	ErrTooLarge = errors.New("idem: too large")
	// ErrUnknownOutcome: the commit may or may not have been applied.
	ErrUnknownOutcome = errors.New("idem: commit outcome unknown")
	// ErrInvalidKey: a Key that fails [Key.Validate].
	ErrInvalidKey = errors.New("idem: invalid key")
	// ErrReadOnly: a write in a transaction of
	// [ReadOnlyRunner.RunReadOnly]. Nothing was written.
	ErrReadOnly = errors.New("idem: write in a read-only transaction")
)

// A WriteOption changes how one write is stored.
type WriteOption func(*WriteOptions)

// WriteOptions is the result of applying WriteOptions; backends read it with
// [ApplyWriteOptions].
type WriteOptions struct {
	// ExpiresAt, when not zero, is when the document stops being live.
	ExpiresAt time.Time
	// AtCommit lets a Create check its condition when the transaction
	// commits; see [CreateAtCommit].
	AtCommit bool
}

// WithExpiry makes the document expire at t: from then on Get reports it
// absent and Create may replace it, whether or not the backend has deleted it
// yet. Backends store t in their native time-to-live field.
func WithExpiry(t time.Time) WriteOption {
	return func(o *WriteOptions) { o.ExpiresAt = t }
}

// CreateAtCommit lets a backend check a Create's condition when the
// transaction commits instead of when Create is called, so that it can send
// the write with the commit and save a round trip. A live document at the key
// then fails the whole attempt with ErrConflict, and Run calls fn again,
// instead of Create returning ErrExists. Use it where fn's next attempt reads
// the key anyway (the op record: a retry finds it and replays). Backends
// that cannot defer ignore it, and Create returns ErrExists as usual. Other
// writes ignore it.
func CreateAtCommit() WriteOption {
	return func(o *WriteOptions) { o.AtCommit = true }
}

// ApplyWriteOptions folds opts into one WriteOptions.
func ApplyWriteOptions(opts []WriteOption) WriteOptions {
	var o WriteOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Live reports whether a document with the given expiry is live at now.
// A zero expiry never expires. So that every backend agrees
// on the boundary: a document whose expiry equals now is expired.
func Live(expiresAt, now time.Time) bool {
	return expiresAt.IsZero() || expiresAt.After(now)
}

// EncodeDocument marshals doc as a stored document. It fails with an error
// wrapping ErrTooLarge when the JSON is over maxBytes, so every backend
// measures its limit the same way.
func EncodeDocument(doc any, maxBytes int) ([]byte, error) {
	var b []byte
	var err error
	if e, ok := doc.(documentEncoder); ok {
		b, err = e.EncodeDocument()
	} else {
		b, err = json.Marshal(doc)
	}
	if err != nil {
		return nil, fmt.Errorf("idem: encoding document: %w", err)
	}
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%w: document is %d bytes, limit %d", ErrTooLarge, len(b), maxBytes)
	}
	return b, nil
}

// A documentEncoder is a document that encodes itself, as encoding/json
// would, into JSON that is valid by construction: EncodeDocument stores its
// bytes as they are. (A MarshalJSON's output encoding/json scans again.)
// The middleware's op record is one.
type documentEncoder interface {
	EncodeDocument() ([]byte, error)
}

// scopeKey keys the context of a Run with the scope it runs for.
type scopeKey struct{}

// WithScope returns ctx for a Run on behalf of scope, the caller a
// middleware call belongs to. A store whose transactions wait in line for
// one writer (SQLite) serves the scopes waiting in turn, round robin, and
// each scope's transactions in the order they came, so that one caller's
// many transactions never stand all in front of another's. Other stores
// may ignore it.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeOf returns the scope ctx was given by [WithScope], or "".
func ScopeOf(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}
