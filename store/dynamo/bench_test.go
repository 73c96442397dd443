package dynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

// countingTransport counts the requests a client sends.
type countingTransport struct {
	next  http.RoundTripper
	calls atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

// BenchmarkFirstCall compares, on one DynamoDB, a tool call through the
// middleware (one transaction: the note and its op record) with the
// three-call protocol other idempotency layers use (a conditional PutItem
// claiming the op id, the business PutItem, an UpdateItem completing the
// claim), and a replay with the first call. Both write the note blindly
// (Put, PutItem), and the wrapped handler is called directly, without an
// MCP transport, as the three calls are. calls/op counts DynamoDB requests.
// A bare consistent GetItem of one small item is measured alongside: no
// replay can cost less than one read, so get/first is the floor of
// replay/first on the DynamoDB the benchmark runs against.
func BenchmarkFirstCall(b *testing.B) {
	ct := &countingTransport{}
	c := newClient(b, 3, func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
	s := newStore(b, c, nil)
	ctx := context.Background()
	type note struct {
		Text string `json:"text"`
	}
	type added struct {
		ID string `json:"id"`
	}
	var n atomic.Int64
	_, handle := idem.Tool(&mcp.Tool{Name: "add_note", Description: "Add a note."}, s,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in note) (*mcp.CallToolResult, added, error) {
			id := fmt.Sprintf("note-%d", n.Add(1))
			return nil, added{ID: id}, tx.Put(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.RequireOpID())
	call := func(b *testing.B, opID string) *mcp.CallToolResult {
		r, err := handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add_note",
			Arguments: json.RawMessage(`{"text":"hello","op_id":"` + opID + `"}`)}})
		if err != nil || r.IsError {
			b.Fatalf("call: %v %v", err, r)
		}
		return r
	}
	table := aws.String(s.Table())
	threeCall := func(i int64) {
		op := &types.AttributeValueMemberS{Value: fmt.Sprintf("claim#op-%d", i)}
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table,
			Item:                map[string]types.AttributeValue{"pk": op, "state": &types.AttributeValueMemberS{Value: "pending"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table,
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("plain#note-%d", i)},
				"doc": &types.AttributeValueMemberS{Value: `{"text":"hello"}`}}}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table,
			Key:                       map[string]types.AttributeValue{"pk": op},
			UpdateExpression:          aws.String("SET #s = :done, #r = :res"),
			ConditionExpression:       aws.String("#s = :pending"),
			ExpressionAttributeNames:  map[string]string{"#s": "state", "#r": "result"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":done": &types.AttributeValueMemberS{Value: "done"}, ":pending": &types.AttributeValueMemberS{Value: "pending"}, ":res": &types.AttributeValueMemberS{Value: `{"id":"x"}`}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	// The three interleaved in every iteration, so that drift hits them
	// alike.
	getItem := func(i int64) {
		if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("claim#op-%d", i)}}}); err != nil {
			b.Fatal(err)
		}
	}
	// Warm DynamoDB Local (its JIT, the table's first pages) before
	// anything is timed: untimed, the first rounds of a run cost up to
	// twice the later ones, and fall on whichever variant runs first.
	for i := int64(-50); i < 0; i++ {
		call(b, fmt.Sprintf("warm-%d", i))
		threeCall(i)
		call(b, fmt.Sprintf("warm-%d", i))
		getItem(i)
	}
	var tFirst, tThree, tReplay, tGet time.Duration
	var cFirst, cThree, cReplay int64
	i := int64(0)
	for b.Loop() {
		i++
		opID := fmt.Sprintf("op-%d", i)
		c0, t0 := ct.calls.Load(), time.Now()
		if r := call(b, opID); r.Meta[idem.MetaReplayed] == true {
			b.Fatal("first call replayed")
		}
		c1, t1 := ct.calls.Load(), time.Now()
		threeCall(i)
		c2, t2 := ct.calls.Load(), time.Now()
		if r := call(b, opID); r.Meta[idem.MetaReplayed] != true {
			b.Fatal("repeat not replayed")
		}
		c3, t3 := ct.calls.Load(), time.Now()
		getItem(i)
		tGet += time.Since(t3)
		tFirst, tThree, tReplay = tFirst+t1.Sub(t0), tThree+t2.Sub(t1), tReplay+t3.Sub(t2)
		cFirst, cThree, cReplay = cFirst+c1-c0, cThree+c2-c1, cReplay+c3-c2
	}
	count := float64(i)
	b.ReportMetric(float64(tFirst.Nanoseconds())/count, "first-ns/op")
	b.ReportMetric(float64(tThree.Nanoseconds())/count, "three-call-ns/op")
	b.ReportMetric(float64(tReplay.Nanoseconds())/count, "replay-ns/op")
	b.ReportMetric(float64(tFirst)/float64(tThree), "first/three-call")
	b.ReportMetric(float64(tReplay)/float64(tFirst), "replay/first")
	b.ReportMetric(float64(tGet)/float64(tFirst), "get/first")
	b.ReportMetric(float64(tReplay)/float64(tGet), "replay/get")
	b.ReportMetric(float64(cFirst)/count, "first-calls/op")
	b.ReportMetric(float64(cThree)/count, "three-calls/op")
	b.ReportMetric(float64(cReplay)/count, "replay-calls/op")
}
