// Package firestore is an [idem.Store] on Cloud Firestore (native mode), for
// apps that keep their users' data under users/{uid} and want the op records
// of a call next to it, written in the same transaction as the change.
//
//	client, err := firestore.NewClient(ctx, projectID) // cloud.google.com/go/firestore
//	s, err := idemfs.New(client, nil)
//	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		return tx.Create(ctx, idem.Key{Owner: uid, Collection: "posts", ID: "p1"}, post)
//	})
//
// A key with an owner is the document users/{owner}/{collection}/{id}
// (the root collection is [Options.OwnerCollection]); a key without one is
// {collection}/{id}. The middleware keys op records by the caller's scope,
// so with a scope that is the user's uid they land in users/{uid}/idem_ops.
//
// Run is one Firestore transaction (client.RunTransaction): writes are
// buffered and sent with the commit, each with a precondition from fn's read
// of its key; what fn read and does not write is read again, and locked, in
// the transaction before the commit. docs/firestore.md has the layout, the
// TTL policy, the limits and security rules.
package firestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	fs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/sdk/idem/backend"
)

// The fields of a stored document.
const (
	// FieldDocument holds the document's JSON text, as a string.
	FieldDocument = "doc"
	// FieldExpiresAt holds the document's expiry, a timestamp, when it has
	// one: the field of the collection group's TTL policy.
	FieldExpiresAt = "expiresAt"
	// FieldWrittenAt is the commit time of the last write (a server
	// timestamp). Every write changes it, so every write moves the
	// document's update time, which is its version.
	FieldWrittenAt = "writtenAt"
)

// Options configure a Store. The zero value (or nil) means the defaults.
type Options struct {
	// OwnerCollection is the root collection of keys with an owner: the key
	// {owner, collection, id} is the document
	// {OwnerCollection}/{owner}/{collection}/{id}. Default "users".
	OwnerCollection string
	// CollectionPrefix is put in front of the collection of keys without
	// an owner, to keep several stores (or tests) apart in one database.
	// Default "". It holds only [A-Za-z0-9_-] and does not begin with '_'.
	CollectionPrefix string
	// Now is the store's clock, used to decide whether a document has
	// expired. Default time.Now.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts; larger
	// ones fail with idem.ErrTooLarge. Default and maximum 1 MiB less 4 KiB,
	// which leaves room under Firestore's 1 MiB for the path and the
	// store's other fields.
	MaxDocumentBytes int
	// MaxWrites is the most writes one Run may commit; more fail with
	// idem.ErrTooLarge before anything is sent. Default and maximum 500.
	MaxWrites int
	// MaxAttempts bounds how many times Run calls fn when its transaction
	// keeps aborting or losing to concurrent ones. Default 32.
	MaxAttempts int
}

// MaxDocumentBytes is the default and largest Options.MaxDocumentBytes.
const MaxDocumentBytes = 1<<20 - 4<<10

// MaxWrites is the default and largest Options.MaxWrites.
const MaxWrites = 500

// Store is an idem.Store on one Firestore database. It is safe for
// concurrent use. The zero value is not usable; call New.
type Store struct {
	client    *fs.Client
	owners    string // root collection of keys with an owner
	prefix    string // in front of the collection of keys without one
	now       func() time.Time
	maxBytes  int
	maxWrites int
	attempts  int
}

var validPrefix = regexp.MustCompile(`^([A-Za-z0-9-][A-Za-z0-9_-]{0,63})?$`)

// New returns a Store on client; nil opts means the defaults. Every store's
// constructor has this shape: its handle and *Options. Nothing needs
// creating in the database beforehand; see docs/firestore.md for the TTL
// policy on FieldExpiresAt.
func New(client *fs.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("firestore: New needs a client")
	}
	s := &Store{client: client, owners: "users", now: time.Now, maxBytes: MaxDocumentBytes, maxWrites: MaxWrites, attempts: 32}
	if opts == nil {
		return s, nil
	}
	if opts.OwnerCollection != "" {
		if !validPrefix.MatchString(opts.OwnerCollection) {
			return nil, errors.New("firestore: OwnerCollection may hold only [A-Za-z0-9_-], at most 64, and not begin with '_'")
		}
		s.owners = opts.OwnerCollection
	}
	if !validPrefix.MatchString(opts.CollectionPrefix) {
		return nil, errors.New("firestore: CollectionPrefix may hold only [A-Za-z0-9_-], at most 64, and not begin with '_'")
	}
	s.prefix = opts.CollectionPrefix
	if opts.Now != nil {
		s.now = opts.Now
	}
	switch {
	case opts.MaxDocumentBytes < 0 || opts.MaxDocumentBytes > MaxDocumentBytes:
		return nil, fmt.Errorf("firestore: MaxDocumentBytes must be 0..%d", MaxDocumentBytes)
	case opts.MaxWrites < 0 || opts.MaxWrites > MaxWrites:
		return nil, fmt.Errorf("firestore: MaxWrites must be 0..%d", MaxWrites)
	case opts.MaxAttempts < 0:
		return nil, errors.New("firestore: MaxAttempts must not be negative")
	}
	if opts.MaxDocumentBytes > 0 {
		s.maxBytes = opts.MaxDocumentBytes
	}
	if opts.MaxWrites > 0 {
		s.maxWrites = opts.MaxWrites
	}
	if opts.MaxAttempts > 0 {
		s.attempts = opts.MaxAttempts
	}
	return s, nil
}

// Client returns the store's client, for refs to an app's own documents
// written through the native transaction (see Tx.As).
func (s *Store) Client() *fs.Client { return s.client }

// Doc returns the document of k. k must be valid.
func (s *Store) Doc(k backend.Key) *fs.DocumentRef { return s.client.Doc(s.path(k)) }

// stored is a document as read: absent, or its JSON, expiry and version.
type stored struct {
	exists  bool
	data    []byte
	expires time.Time
	updated time.Time // the update time: the precondition of a write over it
}

func (d stored) version() backend.Version { return backend.Version(d.updated.UnixNano()) }

func (s *Store) live(d stored) bool { return d.exists && backend.Live(d.expires, s.now()) }

// decode reads a snapshot (which may be of an absent document).
func decode(k backend.Key, snap *fs.DocumentSnapshot) (stored, error) {
	if snap == nil || !snap.Exists() {
		return stored{}, nil
	}
	d := stored{exists: true, updated: snap.UpdateTime}
	m := snap.Data()
	text, ok := m[FieldDocument].(string)
	if !ok {
		return stored{}, fmt.Errorf("firestore: %s has no string field %q", k, FieldDocument)
	}
	d.data = []byte(text)
	if e, ok := m[FieldExpiresAt].(time.Time); ok {
		d.expires = e
	}
	return d, nil
}

func unmarshal(k backend.Key, data []byte, dst any) error {
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("firestore: decoding %s: %w", k, err)
	}
	return nil
}

// Read implements [backend.Reader]: one read of k's latest committed state,
// outside any transaction.
func (s *Store) Read(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	snap, err := s.Doc(k).Get(ctx)
	if err != nil && status.Code(err) != codes.NotFound {
		return 0, fmt.Errorf("firestore: reading %s: %w", k, err)
	}
	d, err := decode(k, snap)
	if err != nil {
		return 0, err
	}
	if !s.live(d) {
		return 0, backend.ErrNotFound
	}
	if err := unmarshal(k, d.data, dst); err != nil {
		return 0, err
	}
	return d.version(), nil
}
