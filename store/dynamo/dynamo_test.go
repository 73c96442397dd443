package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/internal/testenv"
	"github.com/idemkit/sdk/store/dynamo"
	"github.com/idemkit/sdk/store/storetest"
)

// endpoint returns the test DynamoDB's URL from IDEMKIT_DYNAMODB_URL
// (scripts/with-dynamodb.sh sets it). Without one the test is skipped,
// except in CI, where a missing DynamoDB fails the run.
func endpoint(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "IDEMKIT_DYNAMODB_URL", "scripts/with-dynamodb.sh")
}

// newClient returns a client of the test DynamoDB with dummy credentials;
// rt (if not nil) wraps its HTTP transport, attempts bounds the SDK's own
// retries.
func newClient(t testing.TB, attempts int, rt func(http.RoundTripper) http.RoundTripper) *dynamodb.Client {
	t.Helper()
	url := endpoint(t)
	cfg := aws.Config{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "dummy", SecretAccessKey: "dummy", Source: "test"}, nil
		}),
		RetryMaxAttempts: attempts,
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		// DynamoDB Local sends no X-Amz-Crc32 on errors.
		o.DisableValidateResponseChecksum = true
		if rt != nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			o.HTTPClient = &http.Client{Transport: rt(tr)}
		}
	})
}

var sharedClient atomic.Pointer[dynamodb.Client]

// client returns one client for the tests that need nothing special.
func client(t testing.TB) *dynamodb.Client {
	if c := sharedClient.Load(); c != nil {
		return c
	}
	c := newClient(t, 3, func(rt http.RoundTripper) http.RoundTripper { return rt })
	sharedClient.CompareAndSwap(nil, c)
	return sharedClient.Load()
}

var tables atomic.Int64

// newTable returns a fresh table name, deleted at cleanup.
func newTable(t testing.TB, c *dynamodb.Client) string {
	t.Helper()
	name := fmt.Sprintf("idemkit_%d_%d", os.Getpid(), tables.Add(1))
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("deleting table %s: %v", name, err)
		}
	})
	return name
}

// createTable creates table with the partition key key (S), on demand.
func createTable(t testing.TB, c *dynamodb.Client, table, key string) {
	t.Helper()
	_, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("creating table %s: %v", table, err)
	}
}

// newStore returns a store on a fresh table of its own. The table has no
// TTL: the suite drives the store's clock, and DynamoDB's TTL (which
// DynamoDB Local runs too) would delete documents by the real one.
func newStore(t testing.TB, c *dynamodb.Client, opts *dynamo.Options) *dynamo.Store {
	t.Helper()
	s, err := dynamo.New(c, newTable(t, c), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	createTable(t, c, s.Table(), "pk")
	return s
}

func TestConformance(t *testing.T) {
	endpoint(t)
	// The native writes go to a table of the server's own.
	native := newTable(t, client(t))
	createTable(t, client(t), native, "id")
	nativeWrites := func(tx idem.Tx) (*dynamo.Writes, error) {
		var w *dynamo.Writes
		if !tx.As(&w) {
			return nil, errors.New("As(**dynamo.Writes) = false")
		}
		return w, nil
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, now func() time.Time) idem.Store {
			return newStore(t, client(t), &dynamo.Options{Now: now})
		},
		MaxDocumentBytes:    dynamo.MaxItemBytes - 2<<10,
		MaxTransactionItems: dynamo.MaxTransactionItems,
		Reader:              true,
		Expirer:             true,
		As:                  []any{new(*dynamo.Writes)},
		AsWrite: func(ctx context.Context, tx idem.Tx, id string) error {
			w, err := nativeWrites(tx)
			if err != nil {
				return err
			}
			return w.Add(types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(native),
				Item:      map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
			}})
		},
		AsRead: func(ctx context.Context, tx idem.Tx, id string) (bool, error) {
			w, err := nativeWrites(tx)
			if err != nil {
				return false, err
			}
			out, err := w.Client().GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(native),
				Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return false, err
			}
			return out.Item != nil, nil
		},
	})
}

func TestCreateTable(t *testing.T) {
	c := client(t)
	s, err := dynamo.New(c, newTable(t, c), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := s.CreateTable(ctx); err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
	}
	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.Table())})
	if err != nil {
		t.Fatalf("DescribeTimeToLive: %v", err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expires_at" {
		t.Fatalf("TTL %+v, want enabled on expires_at", d)
	}
	k := idem.Key{Collection: "docs", ID: "k"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, 1) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, k, nil); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := client(t)
	if _, err := dynamo.New(nil, "docs", nil); err == nil {
		t.Fatal("New(nil client) succeeded")
	}
	if _, err := dynamo.New(c, "", nil); err == nil {
		t.Fatal("New with no table succeeded")
	}
	if _, err := dynamo.New(c, "docs", &dynamo.Options{MaxAttempts: -1}); err == nil {
		t.Fatal("New accepted MaxAttempts -1")
	}
}

// count returns how many items table holds.
func count(t *testing.T, c *dynamodb.Client, table string) int32 {
	t.Helper()
	out, err := c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out.Count
}

// TestTooLarge: a document over the item limit and a write set over the
// transaction's item limit are refused before anything is sent.
func TestTooLarge(t *testing.T) {
	c := client(t)
	s := newStore(t, c, nil)
	ctx := context.Background()
	big := strings.Repeat("a", 401<<10)
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		if err := tx.Create(ctx, idem.Key{Collection: "docs", ID: "first"}, "small"); err != nil {
			return err
		}
		return tx.Put(ctx, idem.Key{Collection: "docs", ID: "big"}, big)
	})
	if !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Run with a 401 KB document = %v, want ErrTooLarge", err)
	}
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range 101 {
			if err := tx.Put(ctx, idem.Key{Collection: "docs", ID: fmt.Sprint(i)}, i); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Run writing 101 documents = %v, want ErrTooLarge", err)
	}
	// Eleven documents of 390 KB: each fits, together they pass 4 MB.
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range 11 {
			if err := tx.Put(ctx, idem.Key{Collection: "docs", ID: fmt.Sprint(i)}, strings.Repeat("b", 390<<10)); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Run writing 4.2 MB = %v, want ErrTooLarge", err)
	}
	if n := count(t, c, s.Table()); n != 0 {
		t.Fatalf("%d items written by refused transactions, want 0", n)
	}
	// 100 documents are fine.
	err = s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		for i := range 100 {
			if err := tx.Put(ctx, idem.Key{Collection: "docs", ID: fmt.Sprint(i)}, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run writing 100 documents: %v", err)
	}
}

// TestWritesOwnCondition: an item of the author's own table, added with
// Writes.Add, commits with the store's writes, and its failed condition
// fails the whole transaction.
func TestWritesOwnCondition(t *testing.T) {
	c := client(t)
	s := newStore(t, c, nil)
	orders := newTable(t, c)
	ctx := context.Background()
	createTable(t, c, orders, "id")
	order := func(doc string) (int, error) {
		attempts := 0
		err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			attempts++
			var w *dynamo.Writes
			if !tx.As(&w) {
				return errors.New("As(*dynamo.Writes) = false")
			}
			if err := w.Add(types.TransactWriteItem{Put: &types.Put{
				TableName:           aws.String(orders),
				Item:                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o1"}},
				ConditionExpression: aws.String("attribute_not_exists(id)"),
			}}); err != nil {
				return err
			}
			return tx.Put(ctx, idem.Key{Collection: "docs", ID: doc}, doc)
		})
		return attempts, err
	}
	if _, err := order("first"); err != nil {
		t.Fatalf("first order: %v", err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(orders),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o1"}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("the order was not written with the transaction: %v", err)
	}
	attempts, err := order("second")
	if !errors.Is(err, dynamo.ErrConditionFailed) {
		t.Fatalf("second order = %v, want ErrConditionFailed", err)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("second order's error %v does not wrap the native cancellation", err)
	}
	if attempts != 2 {
		t.Fatalf("fn ran %d times, want 2 (once more after its own condition failed)", attempts)
	}
	if _, err := s.Read(ctx, idem.Key{Collection: "docs", ID: "second"}, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Read of the document of the failed transaction = %v, want ErrNotFound", err)
	}
}

// TestBlindWriteRisesPastAnotherProcess: a write of an item fn did not read
// gets a version above the item's, also when another process, whose clock
// is an hour ahead of this one's, wrote it: the write's condition (its
// version above the stored one) fails, the store raises its clock past the
// version it met, and writes again. Versions never go down.
func TestBlindWriteRisesPastAnotherProcess(t *testing.T) {
	c := client(t)
	s := newStore(t, c, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "ahead"}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k.Collection + "#" + k.StoredID()}}
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"pk":  key["pk"],
		"ver": &types.AttributeValueMemberN{Value: fmt.Sprint(ahead)},
		"doc": &types.AttributeValueMemberS{Value: `{"n":1}`},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return tx.Put(ctx, k, map[string]int{"n": 2})
	}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem: %v", err)
	}
	var got int64
	if n, ok := out.Item["ver"].(*types.AttributeValueMemberN); ok {
		fmt.Sscan(n.Value, &got)
	}
	if doc, _ := out.Item["doc"].(*types.AttributeValueMemberS); doc == nil || doc.Value != `{"n":2}` || got <= ahead {
		t.Fatalf("after the blind write: version %d (another process wrote %d), document %v; want a higher version and {\"n\":2}", got, ahead, out.Item["doc"])
	}
}
