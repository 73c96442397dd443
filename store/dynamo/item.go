package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/idem/backend"
)

// pk is the partition key of k's item. Collections never hold '#', so the
// first '#' ends the collection.
func pk(k backend.Key) string { return k.Collection + "#" + k.StoredID() }

// item is one stored item as read: a document, a tombstone, or nothing.
type item struct {
	exists    bool
	version   backend.Version
	data      []byte
	deleted   bool
	hasExpiry bool
	expiresNS int64
}

// live reports whether the item holds a document that is live at now.
func (it item) live(now time.Time) bool {
	if !it.exists || it.deleted {
		return false
	}
	return !it.hasExpiry || backend.Live(time.Unix(0, it.expiresNS), now)
}

func (it item) decode(k backend.Key, dst any) error {
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(it.data, dst); err != nil {
		return fmt.Errorf("dynamo: decoding %s: %w", k, err)
	}
	return nil
}

func parseItem(m map[string]types.AttributeValue) (item, error) {
	if m == nil {
		return item{}, nil
	}
	it := item{exists: true}
	n, ok := m[attrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return item{}, fmt.Errorf("dynamo: an item without a numeric %s", attrVersion)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return item{}, fmt.Errorf("dynamo: reading %s: %w", attrVersion, err)
	}
	it.version = backend.Version(v)
	if d, ok := m[attrDeleted].(*types.AttributeValueMemberBOOL); ok && d.Value {
		it.deleted = true
		return it, nil
	}
	if s, ok := m[attrDoc].(*types.AttributeValueMemberS); ok {
		it.data = []byte(s.Value)
	}
	if e, ok := m[attrExpiresNS].(*types.AttributeValueMemberN); ok {
		if it.expiresNS, err = strconv.ParseInt(e.Value, 10, 64); err != nil {
			return item{}, fmt.Errorf("dynamo: reading %s: %w", attrExpiresNS, err)
		}
		it.hasExpiry = true
	}
	return it, nil
}

// get reads k's item with ConsistentRead.
func (s *Store) get(ctx context.Context, k backend.Key) (item, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{attrKey: str(pk(k))},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return item{}, readError(k, err)
	}
	return parseItem(out.Item)
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// ttlSeconds is t in epoch seconds rounded up, so that DynamoDB's TTL never
// deletes a document before it has expired.
func ttlSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// itemBytes estimates an item's size as DynamoDB counts it: attribute names
// and values.
func itemBytes(m map[string]types.AttributeValue) int {
	n := 0
	for name, v := range m {
		n += len(name) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 2
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n + 3
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s)/2 + 2
		}
		return n + 3
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n + 3
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueBytes(e) + 1
		}
		return n
	case *types.AttributeValueMemberM:
		return itemBytes(v.Value) + 3 + len(v.Value)
	default: // BOOL, NULL
		return 1
	}
}

// versionClock hands out versions: microseconds of the wall clock, raised
// past every version it handed out or observed, so that they only go up in
// this process and a version written over one read is always greater.
type versionClock struct{ last atomic.Int64 }

// next returns a version greater than after and than any before it.
func (c *versionClock) next(after backend.Version) backend.Version {
	for {
		last := c.last.Load()
		v := max(time.Now().UnixMicro(), last+1, int64(after)+1)
		if c.last.CompareAndSwap(last, v) {
			return backend.Version(v)
		}
	}
}

// observe raises the clock past v, a version another process wrote.
func (c *versionClock) observe(v backend.Version) {
	for {
		last := c.last.Load()
		if int64(v) <= last || c.last.CompareAndSwap(last, int64(v)) {
			return
		}
	}
}
