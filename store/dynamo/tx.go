package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/idem/backend"
)

// seen is the state of an item as fn first read it: the commit requires it
// unchanged.
type seen struct {
	exists  bool
	version backend.Version
}

type write struct {
	key       backend.Key
	data      []byte // nil: delete
	version   backend.Version
	hasExpiry bool
	expires   time.Time
	atCommit  bool // a Create of a key fn did not read, checked at commit
}

type tx struct {
	s      *Store
	closed bool
	reads  map[string]seen // by pk
	writes map[string]*write
	order  []string                  // pks of writes, in the order fn first wrote them
	own    []types.TransactWriteItem // added with Writes.Add
}

func newTx(s *Store) *tx {
	return &tx{s: s, reads: make(map[string]seen), writes: make(map[string]*write)}
}

func (t *tx) close() { t.closed = true }

var errClosed = errors.New("dynamo: transaction used after Run returned")

func (t *tx) check(k backend.Key) error {
	if t.closed {
		return errClosed
	}
	return k.Validate()
}

// view returns the state this tx sees at k: its own write if any, else the
// item read with ConsistentRead, recording what it saw.
func (t *tx) view(ctx context.Context, k backend.Key) (data []byte, v backend.Version, live bool, err error) {
	p := pk(k)
	if w, ok := t.writes[p]; ok {
		if w.data == nil {
			return nil, 0, false, nil
		}
		return w.data, w.version, !w.hasExpiry || backend.Live(w.expires, t.s.now()), nil
	}
	it, err := t.s.get(ctx, k)
	if err != nil {
		return nil, 0, false, err
	}
	if _, ok := t.reads[p]; !ok {
		t.reads[p] = seen{exists: it.exists, version: it.version}
	}
	return it.data, it.version, it.live(t.s.now()), nil
}

func (t *tx) Get(ctx context.Context, k backend.Key, dst any) (backend.Version, error) {
	if err := t.check(k); err != nil {
		return 0, err
	}
	data, v, live, err := t.view(ctx, k)
	if err != nil {
		return 0, err
	}
	if !live {
		return 0, backend.ErrNotFound
	}
	if dst != nil {
		if err := (item{data: data}).decode(k, dst); err != nil {
			return 0, err
		}
	}
	return v, nil
}

func (t *tx) put(k backend.Key, data []byte, opts []backend.WriteOption, atCommit bool) {
	p := pk(k)
	o := backend.ApplyWriteOptions(opts)
	if _, ok := t.writes[p]; !ok {
		t.order = append(t.order, p)
	}
	t.writes[p] = &write{key: k, data: data, version: t.s.clock.next(t.reads[p].version),
		hasExpiry: !o.ExpiresAt.IsZero(), expires: o.ExpiresAt, atCommit: atCommit}
}

func (t *tx) Create(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	p := pk(k)
	_, read := t.reads[p]
	_, wrote := t.writes[p]
	if backend.ApplyWriteOptions(opts).AtCommit && !read && !wrote {
		// The condition goes out with the commit: no read now.
		t.put(k, b, opts, true)
		return nil
	}
	_, _, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if live {
		return backend.ErrExists
	}
	t.put(k, b, opts, false)
	return nil
}

func (t *tx) Put(ctx context.Context, k backend.Key, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	t.put(k, b, opts, false)
	return nil
}

func (t *tx) Update(ctx context.Context, k backend.Key, v backend.Version, doc any, opts ...backend.WriteOption) error {
	if err := t.check(k); err != nil {
		return err
	}
	b, err := backend.EncodeDocument(doc, t.s.maxBytes)
	if err != nil {
		return err
	}
	_, cur, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if !live {
		return backend.ErrNotFound
	}
	if cur != v {
		return backend.ErrConflict
	}
	t.put(k, b, opts, false)
	return nil
}

func (t *tx) Delete(ctx context.Context, k backend.Key, v backend.Version) error {
	if err := t.check(k); err != nil {
		return err
	}
	_, cur, live, err := t.view(ctx, k)
	if err != nil {
		return err
	}
	if !live {
		return backend.ErrNotFound
	}
	if v != 0 && cur != v {
		return backend.ErrConflict
	}
	t.put(k, nil, nil, false)
	return nil
}

// As sets target, a **Writes, to this transaction's handle for items of
// your own, and reports whether target was one.
func (t *tx) As(target any) bool {
	if p, ok := target.(**Writes); ok && p != nil {
		*p = &Writes{t: t}
		return true
	}
	return false
}

// stale reports whether an item fn read has changed since, by reading the
// versions of all of them at once (TransactGetItems, 100 at a time). If that
// fails it reports false: fn's own error stands.
func (t *tx) stale(ctx context.Context) bool {
	var keys []string
	for p := range t.reads {
		keys = append(keys, p)
	}
	for len(keys) > 0 {
		n := min(len(keys), MaxTransactionItems)
		gets := make([]types.TransactGetItem, n)
		for i, p := range keys[:n] {
			gets[i] = types.TransactGetItem{Get: &types.Get{
				TableName:                aws.String(t.s.table),
				Key:                      map[string]types.AttributeValue{attrKey: str(p)},
				ProjectionExpression:     aws.String("#v"),
				ExpressionAttributeNames: map[string]string{"#v": attrVersion},
			}}
		}
		out, err := t.s.client.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets})
		if err != nil || len(out.Responses) != n {
			return false
		}
		for i, r := range out.Responses {
			it, err := parseItem(r.Item)
			if err != nil {
				return false
			}
			if was := t.reads[keys[i]]; it.exists != was.exists || it.version != was.version {
				return true
			}
		}
		keys = keys[n:]
	}
	return false
}

// condition is the commit's condition on an item fn read: unchanged.
func (sn seen) condition() (*string, map[string]string, map[string]types.AttributeValue) {
	if !sn.exists {
		return aws.String("attribute_not_exists(#k)"), map[string]string{"#k": attrKey}, nil
	}
	return aws.String("#v = :seen"), map[string]string{"#v": attrVersion},
		map[string]types.AttributeValue{":seen": num(int64(sn.version))}
}

// commit sends the writes, with a condition for every item fn read, as one
// TransactWriteItems. Nothing is sent for a transaction that wrote nothing.
func (t *tx) commit(ctx context.Context) error {
	if len(t.writes) == 0 && len(t.own) == 0 {
		return nil
	}
	now := t.s.now()
	items := make([]types.TransactWriteItem, 0, len(t.writes)+len(t.reads)+len(t.own))
	size := 0
	for _, p := range t.order {
		w := t.writes[p]
		put := &types.Put{TableName: aws.String(t.s.table), Item: map[string]types.AttributeValue{
			attrKey:     str(p),
			attrVersion: num(int64(w.version)),
		}}
		if w.data == nil {
			put.Item[attrDeleted] = &types.AttributeValueMemberBOOL{Value: true}
			put.Item[attrTTL] = num(ttlSeconds(time.Now().Add(tombstoneTTL)))
		} else {
			put.Item[attrDoc] = str(string(w.data))
			if w.hasExpiry {
				put.Item[attrTTL] = num(ttlSeconds(w.expires))
				put.Item[attrExpiresNS] = num(w.expires.UnixNano())
			}
		}
		if sn, ok := t.reads[p]; ok {
			put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = sn.condition()
		} else {
			// A blind write: the version must go up over whatever is there
			// (ALL_OLD tells the clock if another process is ahead).
			put.ExpressionAttributeNames = map[string]string{"#k": attrKey, "#v": attrVersion}
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(int64(w.version))}
			put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			if w.atCommit {
				put.ConditionExpression = aws.String("attribute_not_exists(#k) OR ((attribute_exists(#d) OR #e <= :now) AND #v < :v)")
				put.ExpressionAttributeNames["#d"] = attrDeleted
				put.ExpressionAttributeNames["#e"] = attrExpiresNS
				put.ExpressionAttributeValues[":now"] = num(now.UnixNano())
			} else {
				put.ConditionExpression = aws.String("attribute_not_exists(#k) OR #v < :v")
			}
		}
		size += itemBytes(put.Item)
		items = append(items, types.TransactWriteItem{Put: put})
	}
	for p, sn := range t.reads {
		if _, ok := t.writes[p]; ok {
			continue
		}
		cc := &types.ConditionCheck{TableName: aws.String(t.s.table), Key: map[string]types.AttributeValue{attrKey: str(p)}}
		cc.ConditionExpression, cc.ExpressionAttributeNames, cc.ExpressionAttributeValues = sn.condition()
		size += len(attrKey) + len(p)
		items = append(items, types.TransactWriteItem{ConditionCheck: cc})
	}
	stored := len(items)
	for _, it := range t.own {
		size += ownBytes(it)
	}
	items = append(items, t.own...)
	if len(items) > MaxTransactionItems {
		return fmt.Errorf("%w: the transaction holds %d items (writes and checks of what it read), DynamoDB's limit is %d",
			backend.ErrTooLarge, len(items), MaxTransactionItems)
	}
	if size > MaxTransactionBytes {
		return fmt.Errorf("%w: the transaction is about %d bytes, DynamoDB's limit is %d",
			backend.ErrTooLarge, size, MaxTransactionBytes)
	}
	_, err := t.s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(newToken()),
	})
	if err == nil {
		return nil
	}
	return t.commitError(err, items[:stored], now)
}

// commitError maps a failed TransactWriteItems onto the store's errors;
// stored are the items of the store's own, before those of Writes.Add.
func (t *tx) commitError(err error, stored []types.TransactWriteItem, now time.Time) error {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return requestError(err)
	}
	var conflict, live, own, throttled bool
	for i, r := range tce.CancellationReasons {
		switch code := aws.ToString(r.Code); code {
		case "", "None":
		case "ConditionalCheckFailed":
			if i >= len(stored) {
				own = true
				continue
			}
			conflict = true
			if old, perr := parseItem(r.Item); perr == nil && old.exists {
				t.s.clock.observe(old.version)
				if put := stored[i].Put; put != nil && old.live(now) {
					if w := t.writes[put.Item[attrKey].(*types.AttributeValueMemberS).Value]; w != nil && w.atCommit {
						live = true
					}
				}
			}
		case "TransactionConflict":
			conflict = true
		case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			throttled = true
		default:
			return fmt.Errorf("dynamo: transaction cancelled (%s at item %d: %s): %w", code, i, aws.ToString(r.Message), err)
		}
	}
	switch {
	case live:
		return fmt.Errorf("%w: %w", errLiveDocument, err)
	case conflict:
		return fmt.Errorf("%w: %w", errCommitConflict, err)
	case own:
		return fmt.Errorf("%w: %w", ErrConditionFailed, err)
	case throttled:
		return fmt.Errorf("%w: %w", errThrottled, err)
	}
	return fmt.Errorf("dynamo: transaction cancelled: %w", err)
}

// newToken returns a fresh ClientRequestToken (1..36 characters).
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
