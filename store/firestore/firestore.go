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
// the transaction before the commit. docs/stores.md has the layout, the
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
	"github.com/idemkit/sdk/idem/backend/kit"
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

// Options configure a Store. The zero value (or nil) means the defaults;
// New refuses a negative number, naming the field.
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
	opts      kit.Options
	retry     kit.Retry
	maxWrites int
}

var (
	_ backend.Store   = (*Store)(nil)
	_ backend.Reader  = (*Store)(nil)
	_ backend.Expirer = (*Store)(nil)
	_ backend.Tx      = (*tx)(nil)
	_ kit.Source      = (*tx)(nil)
)

var validPrefix = regexp.MustCompile(`^([A-Za-z0-9-][A-Za-z0-9_-]{0,63})?$`)

// ExpiryField implements [backend.Expirer]: Firestore deletes expired
// documents once a TTL policy is enabled on FieldExpiresAt for each
// collection group the store writes with an expiry (idem_ops for op
// records). Without one they are never deleted (docs/stores.md).
func (s *Store) ExpiryField() string { return FieldExpiresAt }

// New returns a Store on client; nil opts means the defaults. Every store's
// constructor has this shape: its handle and *Options. Nothing needs
// creating in the database beforehand; see docs/stores.md for the TTL
// policy on FieldExpiresAt.
func New(client *fs.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("firestore: New needs a client")
	}
	if opts == nil {
		opts = &Options{}
	}
	s := &Store{client: client, owners: "users", prefix: opts.CollectionPrefix}
	if opts.OwnerCollection != "" {
		if !validPrefix.MatchString(opts.OwnerCollection) {
			return nil, errors.New("firestore: OwnerCollection may hold only [A-Za-z0-9_-], at most 64, and not begin with '_'")
		}
		s.owners = opts.OwnerCollection
	}
	if !validPrefix.MatchString(opts.CollectionPrefix) {
		return nil, errors.New("firestore: CollectionPrefix may hold only [A-Za-z0-9_-], at most 64, and not begin with '_'")
	}
	o, err := kit.Options{Now: opts.Now, MaxDocumentBytes: opts.MaxDocumentBytes, MaxAttempts: opts.MaxAttempts}.
		Resolve("firestore", kit.Options{Now: time.Now, MaxDocumentBytes: MaxDocumentBytes, MaxAttempts: 32})
	if err != nil {
		return nil, err
	}
	if s.maxWrites, err = kit.Default("firestore", "MaxWrites", opts.MaxWrites, MaxWrites); err != nil {
		return nil, err
	}
	switch {
	case o.MaxDocumentBytes > MaxDocumentBytes:
		return nil, fmt.Errorf("firestore: Options.MaxDocumentBytes may be at most %d", MaxDocumentBytes)
	case s.maxWrites > MaxWrites:
		return nil, fmt.Errorf("firestore: Options.MaxWrites may be at most %d", MaxWrites)
	}
	s.opts = o
	s.retry = kit.Retry{Store: "firestore", MaxAttempts: o.MaxAttempts, Base: 2 * time.Millisecond, Cap: 200 * time.Millisecond}
	return s, nil
}

// Client returns the store's client, for refs to an app's own documents
// written through the native transaction (see Tx.As).
func (s *Store) Client() *fs.Client { return s.client }

// Doc returns the document of k. k must be valid.
func (s *Store) Doc(k backend.Key) *fs.DocumentRef { return s.client.Doc(s.path(k)) }

// decode reads a snapshot (which may be of an absent document). Its
// version is its update time, in nanoseconds.
func decode(k backend.Key, snap *fs.DocumentSnapshot) (kit.Doc, error) {
	if snap == nil || !snap.Exists() {
		return kit.Doc{}, nil
	}
	d := kit.Doc{Version: backend.Version(snap.UpdateTime.UnixNano())}
	m := snap.Data()
	text, ok := m[FieldDocument].(string)
	if !ok {
		return kit.Doc{}, fmt.Errorf("firestore: %s has no string field %q", k, FieldDocument)
	}
	d.Data = []byte(text)
	if e, ok := m[FieldExpiresAt].(time.Time); ok {
		d.ExpiresAt = e
	}
	return d, nil
}

// updateTime is the update time of a document read at v, for a
// precondition.
func updateTime(v backend.Version) time.Time { return time.Unix(0, int64(v)) }

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
	if !d.Live(s.opts.Now()) {
		return 0, backend.ErrNotFound
	}
	if err := unmarshal(k, d.Data, dst); err != nil {
		return 0, err
	}
	return d.Version, nil
}
