// Package dynamo is an [idem.Store] on Amazon DynamoDB (aws-sdk-go-v2): one
// table, and one TransactWriteItems call per transaction that writes.
//
//	s, err := dynamo.New(client, "idem_docs", nil)
//	if err != nil { ... }
//	if err := s.CreateTable(ctx); err != nil { ... }
//	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
//		var w *dynamo.Writes
//		tx.As(&w) // your own items, in the same TransactWriteItems
//		w.Add(types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), ...}})
//		return tx.Create(ctx, idem.Key{Collection: "posts", ID: "p1"}, post)
//	})
//
// Transactions are optimistic, as in the memory store: Get reads with
// ConsistentRead and records the version it saw, writes are buffered, and
// the commit is one TransactWriteItems whose conditions require that nothing
// fn read or wrote has changed since. When a condition fails, Run calls fn
// again. A transaction that writes nothing sends nothing.
//
// Every item is keyed by pk = collection + "#" + [backend.Key.StoredID] and
// holds the version (ver), the JSON document (doc), the expiry in epoch
// seconds for DynamoDB's TTL (expires_at) and in nanoseconds for the exact
// check (expires_ns). A deleted document leaves a tombstone (deleted) for a
// day, so that a new document at its key never repeats its version. See
// docs/stores.md for the table, IAM, TTL and the limits.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/idem/backend"
	"github.com/idemkit/sdk/idem/backend/kit"
)

// The DynamoDB limits the store checks before it sends anything.
const (
	// MaxItemBytes is DynamoDB's item size limit (400 KB).
	MaxItemBytes = 400 * 1024
	// MaxTransactionItems is the most items one TransactWriteItems may hold.
	MaxTransactionItems = 100
	// MaxTransactionBytes is the largest TransactWriteItems request (4 MB).
	MaxTransactionBytes = 4 << 20

	// itemOverhead is room in an item for the key and the attributes
	// beside the document: a pk of up to 1,090 bytes, numbers and names.
	itemOverhead = 2 << 10
	// tombstoneTTL is how long a deleted document's tombstone keeps its
	// version.
	tombstoneTTL = 24 * time.Hour
)

// Options configure a Store. The zero value (or nil) means the defaults;
// New refuses a negative number, naming the field.
type Options struct {
	// Now is the store's clock, used to decide whether a document has
	// expired. Default time.Now.
	Now func() time.Time
	// MaxDocumentBytes is the largest JSON document a write accepts; larger
	// ones fail with idem.ErrTooLarge. It is capped (and defaults) to what
	// fits in one item: MaxItemBytes less 2 KiB for the key and the other
	// attributes.
	MaxDocumentBytes int
	// MaxAttempts bounds how many times Run calls fn when it keeps losing to
	// concurrent transactions. Default 64.
	MaxAttempts int
}

// Store is an idem.Store on one DynamoDB table. It is safe for concurrent
// use. Create one with New and its table with CreateTable.
type Store struct {
	client *dynamodb.Client
	table  string
	opts   kit.Options
	retry  kit.Retry
	clock  versionClock
}

var (
	_ backend.Store   = (*Store)(nil)
	_ backend.Reader  = (*Store)(nil)
	_ backend.Expirer = (*Store)(nil)
	_ backend.Tx      = (*tx)(nil)
	_ kit.Source      = (*tx)(nil)
)

// New returns a Store that keeps its documents in table; nil opts means the
// defaults. It does not touch DynamoDB: call CreateTable first, or create the
// table as docs/stores.md shows. It fails on a nil client, an empty table
// name or a negative option.
func New(client *dynamodb.Client, table string, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("dynamo: New needs a client")
	}
	if n := len(table); n < 3 || n > 255 {
		return nil, errors.New("dynamo: the table name must be 3..255 bytes")
	}
	var o kit.Options
	if opts != nil {
		o = kit.Options{Now: opts.Now, MaxDocumentBytes: opts.MaxDocumentBytes, MaxAttempts: opts.MaxAttempts}
	}
	docCap := MaxItemBytes - itemOverhead
	o, err := o.Resolve("dynamo", kit.Options{Now: time.Now, MaxDocumentBytes: docCap, MaxAttempts: 64})
	if err != nil {
		return nil, err
	}
	o.MaxDocumentBytes = min(o.MaxDocumentBytes, docCap)
	return &Store{client: client, table: table, opts: o,
		retry: kit.Retry{Store: "dynamo", MaxAttempts: o.MaxAttempts, Base: time.Millisecond, Cap: 100 * time.Millisecond}}, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// The item's attributes.
const (
	attrKey       = "pk"
	attrVersion   = "ver"
	attrDoc       = "doc"
	attrTTL       = "expires_at" // epoch seconds, rounded up: DynamoDB's TTL
	attrExpiresNS = "expires_ns" // epoch nanoseconds: the exact expiry
	attrDeleted   = "deleted"
)

// CreateTable creates the store's table (partition key pk, on-demand
// billing) if it does not exist, waits until it is active and enables
// DynamoDB's TTL on expires_at. It is safe to call on every start; an error
// enabling TTL is returned (DynamoDB Local 1.25 enables it and deletes
// expired items too). TTL deletes by DynamoDB's clock: Options.Now must
// follow the real one, or TTL deletes documents the store still counts as
// live. Expired documents read as absent before TTL deletes them: the store
// checks expiry itself.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(s.table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: creating table %s: %w", s.table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(s.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 5*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamo: waiting for table %s: %w", s.table, err)
	}
	ttl, err := s.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if err == nil && ttl.TimeToLiveDescription != nil {
		d := ttl.TimeToLiveDescription
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if aws.ToString(d.AttributeName) == attrTTL {
				return nil
			}
			return fmt.Errorf("dynamo: table %s has TTL on %q, want %q", s.table, aws.ToString(d.AttributeName), attrTTL)
		}
	}
	_, err = s.client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(s.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamo: enabling TTL on %s: %w", s.table, err)
	}
	return nil
}

// ExpiryField implements [backend.Expirer]: DynamoDB's TTL deletes expired
// documents, once it is enabled on the table's expires_at attribute (which
// CreateTable does). On a table made some other way, enable it yourself;
// without it expired documents are never deleted (docs/stores.md).
func (s *Store) ExpiryField() string { return attrTTL }

// Run implements idem.Store: fn runs in one optimistic transaction that
// commits, when fn returns nil and wrote something, as one
// TransactWriteItems.
//
// Run calls fn again, up to Options.MaxAttempts times with jittered backoff,
// when a condition of the commit fails (a document fn read or wrote changed
// since), when DynamoDB cancels the transaction for a conflict or throttling,
// and when fn returns an error wrapping idem.ErrConflict; after the last
// attempt it returns an error wrapping idem.ErrConflict. A Create with
// [backend.CreateAtCommit] that finds a live document at commit fails the
// attempt the same way, and the next attempt (at once, without backoff)
// reads that document. A condition of an item added with [Writes.Add] that
// fails is retried once (fn may read what changed) and then returned as an
// error wrapping [ErrConditionFailed] and the native
// *types.TransactionCanceledException.
//
// Every TransactWriteItems carries a fresh ClientRequestToken, so the SDK's
// own retries of it (after a timeout or a 5xx) are applied at most once. If
// the outcome still cannot be known (the response was lost, a 5xx after the
// SDK's last retry), Run returns an error wrapping idem.ErrUnknownOutcome.
// Once fn has returned nil the commit is not cancelled with ctx.
//
// A transaction that only reads sends nothing at commit: each Get saw the
// latest committed item, but not necessarily one state of the table, unless
// fn returns an error, in which case Run checks its reads and calls fn again
// if they changed. If fn panics, nothing is written and the panic continues.
func (s *Store) Run(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	if fn == nil {
		return errors.New("dynamo: Run needs a function")
	}
	own := 0 // failed conditions of items added with Writes.Add
	return s.retry.Do(ctx, func() error { return s.attempt(ctx, fn) }, func(err error) kit.Next {
		switch {
		case errors.Is(err, ErrConditionFailed):
			if own++; own > 1 {
				return kit.Stop
			}
			return kit.Again
		case errors.Is(err, errLiveDocument):
			return kit.AgainNow
		case errors.Is(err, backend.ErrConflict), errors.Is(err, errThrottled):
			return kit.Again
		}
		return kit.Stop
	})
}

func (s *Store) attempt(ctx context.Context, fn func(ctx context.Context, tx backend.Tx) error) error {
	t := &tx{s: s}
	t.Init("dynamo", t, s.opts, kit.Mode{DeferCreates: true})
	defer t.Close() // also when fn panics: nothing was sent
	err := fn(ctx, t)
	t.Close()
	if err != nil {
		if !errors.Is(err, backend.ErrConflict) && t.stale(ctx) {
			// fn decided on reads that no single state held: its error
			// may be an artefact of that, so it runs again.
			return fmt.Errorf("%w (fn returned: %w)", errReadsChanged, err)
		}
		return err
	}
	return t.commit(context.WithoutCancel(ctx))
}

// Read implements backend.Reader: one GetItem with ConsistentRead, outside
// any transaction. A document that is absent, deleted, or whose expiry is not
// after Options.Now reports idem.ErrNotFound and version 0.
func (s *Store) Read(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	it, err := s.get(ctx, k)
	if err != nil {
		return 0, err
	}
	if !it.live(s.opts.Now()) {
		return 0, backend.ErrNotFound
	}
	return it.version, it.decode(k, dst)
}
