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
	"github.com/idemkit/sdk/idem/backend/kit"
)

// tx is one attempt's transaction: a kit.Buffer over the table, whose
// Gets read with ConsistentRead; the commit is one TransactWriteItems.
type tx struct {
	kit.Buffer
	s   *Store
	own []types.TransactWriteItem // added with Writes.Add
}

// ReadDoc implements [kit.Source]: one GetItem with ConsistentRead. A
// tombstone is its version without a document.
func (t *tx) ReadDoc(ctx context.Context, k backend.Key) (kit.Doc, error) {
	it, err := t.s.get(ctx, k)
	if err != nil {
		return kit.Doc{}, err
	}
	d := kit.Doc{Version: it.version}
	if !it.deleted {
		d.Data = it.data
	}
	if it.hasExpiry {
		d.ExpiresAt = time.Unix(0, it.expiresNS)
	}
	return d, nil
}

// NextVersion implements [kit.Source]: a version past the one read and
// every one this process has handed out or seen.
func (t *tx) NextVersion(k backend.Key, read backend.Version) backend.Version {
	return t.s.clock.next(read)
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
	reads := t.Reads()
	for len(reads) > 0 {
		n := min(len(reads), MaxTransactionItems)
		gets := make([]types.TransactGetItem, n)
		for i, r := range reads[:n] {
			gets[i] = types.TransactGetItem{Get: &types.Get{
				TableName:                aws.String(t.s.table),
				Key:                      map[string]types.AttributeValue{attrKey: str(pk(r.Key))},
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
			if it.version != reads[i].Version { // 0 for no item
				return true
			}
		}
		reads = reads[n:]
	}
	return false
}

// condition is the commit's condition on an item fn read at version seen
// (0: no item): unchanged.
func condition(seen backend.Version) (*string, map[string]string, map[string]types.AttributeValue) {
	if seen == 0 {
		return aws.String("attribute_not_exists(#k)"), map[string]string{"#k": attrKey}, nil
	}
	return aws.String("#v = :seen"), map[string]string{"#v": attrVersion},
		map[string]types.AttributeValue{":seen": num(int64(seen))}
}

// commit sends the writes, with a condition for every item fn read, as one
// TransactWriteItems. Nothing is sent for a transaction that wrote nothing.
func (t *tx) commit(ctx context.Context) error {
	writes, reads := t.Writes(), t.Reads()
	if len(writes) == 0 && len(t.own) == 0 {
		return nil
	}
	now := t.s.opts.Now()
	items := make([]types.TransactWriteItem, 0, len(writes)+len(reads)+len(t.own))
	size := 0
	for _, w := range writes {
		p := pk(w.Key)
		put := &types.Put{TableName: aws.String(t.s.table), Item: map[string]types.AttributeValue{
			attrKey:     str(p),
			attrVersion: num(int64(w.Version)),
		}}
		if w.Data == nil {
			put.Item[attrDeleted] = &types.AttributeValueMemberBOOL{Value: true}
			put.Item[attrTTL] = num(ttlSeconds(time.Now().Add(tombstoneTTL)))
		} else {
			put.Item[attrDoc] = str(string(w.Data))
			if !w.ExpiresAt.IsZero() {
				put.Item[attrTTL] = num(ttlSeconds(w.ExpiresAt))
				put.Item[attrExpiresNS] = num(w.ExpiresAt.UnixNano())
			}
		}
		if r := t.ReadOf(w.Key); r != nil {
			put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = condition(r.Version)
		} else {
			// A blind write: the version must go up over whatever is there
			// (ALL_OLD tells the clock if another process is ahead).
			put.ExpressionAttributeNames = map[string]string{"#k": attrKey, "#v": attrVersion}
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(int64(w.Version))}
			put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			if w.AtCommit {
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
	for _, r := range reads {
		if t.WriteOf(r.Key) != nil {
			continue
		}
		p := pk(r.Key)
		cc := &types.ConditionCheck{TableName: aws.String(t.s.table), Key: map[string]types.AttributeValue{attrKey: str(p)}}
		cc.ConditionExpression, cc.ExpressionAttributeNames, cc.ExpressionAttributeValues = condition(r.Version)
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
				// The store's items are its writes, in order, then its
				// checks.
				if writes := t.Writes(); i < len(writes) && writes[i].AtCommit && old.live(now) {
					live = true
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
