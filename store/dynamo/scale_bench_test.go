package dynamo_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/internal/storebench"
	"github.com/idemkit/sdk/store/dynamo"
)

// TestScale is the scale benchmark (storebench.Scale), on demand, on tables
// of its own that it deletes at the end:
//
//	IDEMKIT_SCALE=1 go test -count=1 -run TestScale -v -timeout 60m ./store/dynamo
//
// DynamoDB has no Sweep (its TTL deletes expired items): the calls are
// measured, the sweep is skipped.
func TestScale(t *testing.T) {
	endpoint(t)
	storebench.Scale(t, storebench.ScaleHarness{
		New: func(t *testing.T, now func() time.Time) storebench.ScaleStore {
			c := newClient(t, 3, func(rt http.RoundTripper) http.RoundTripper { return rt })
			s := newStore(t, c, &dynamo.Options{Now: now})
			return storebench.ScaleStore{Store: s, Load: func(ctx context.Context, n int, first time.Time) error {
				return loadOpRecords(ctx, c, s.Table(), n, first)
			}}
		},
		Sizes: []int{1_000_000},
	})
}

// loadWorkers is how many BatchWriteItem calls loadOpRecords keeps in
// flight.
const loadWorkers = 16

// loadOpRecords writes storebench.ScaleRecord 0..n-1 to table as the store
// writes op records (pk, ver, doc, expires_at, expires_ns), 25 items (the
// most one call takes) per BatchWriteItem, from loadWorkers workers.
func loadOpRecords(ctx context.Context, c *dynamodb.Client, table string, n int, first time.Time) error {
	return storebench.LoadInBatches(ctx, n, 25, loadWorkers, func(ctx context.Context, from, to int) error {
		return writeBatch(ctx, c, table, from, to, first)
	})
}

// writeBatch writes records from..to-1 in one BatchWriteItem, sending again
// what DynamoDB leaves unprocessed.
func writeBatch(ctx context.Context, c *dynamodb.Client, table string, from, to int, first time.Time) error {
	var reqs []types.WriteRequest
	for i := from; i < to; i++ {
		k, doc, exp, err := storebench.ScaleRecord(i, first)
		if err != nil {
			return err
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"pk":         &types.AttributeValueMemberS{Value: k.Collection + "#" + k.StoredID()},
			"ver":        &types.AttributeValueMemberN{Value: strconv.Itoa(i + 1)},
			"doc":        &types.AttributeValueMemberS{Value: string(doc)},
			"expires_at": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix()+1, 10)},
			"expires_ns": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.UnixNano(), 10)},
		}}})
	}
	for tries := 0; len(reqs) > 0; tries++ {
		if tries == 10 {
			return fmt.Errorf("%d items of a batch left unprocessed after %d calls", len(reqs), tries)
		}
		if tries > 0 {
			time.Sleep(time.Duration(tries) * 50 * time.Millisecond)
		}
		out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
		if err != nil {
			return err
		}
		reqs = out.UnprocessedItems[table]
	}
	return nil
}

// TestScaleLoad: what the scale benchmark's load writes is what the store
// reads as op records, so that the table it measures holds op records.
func TestScaleLoad(t *testing.T) {
	c := client(t)
	first := time.Now().Add(time.Hour)
	s := newStore(t, c, nil)
	if err := loadOpRecords(t.Context(), c, s.Table(), 30, first); err != nil {
		t.Fatal(err)
	}
	storebench.CheckScaleLoad(t, s, 30, first)
}
