package dynamo_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
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
// three-call protocol (a conditional PutItem claiming the op id, the
// business PutItem, an UpdateItem completing the claim), and a replay with
// the first call. calls/op counts DynamoDB requests.
func BenchmarkFirstCall(b *testing.B) {
	ct := &countingTransport{}
	c := newClient(b, 3, func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
	s := newStore(b, c, nil)
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	type note struct {
		Text string `json:"text"`
	}
	type added struct {
		ID string `json:"id"`
	}
	var n atomic.Int64
	idem.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."}, s,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in note) (*mcp.CallToolResult, added, error) {
			id := fmt.Sprintf("note-%d", n.Add(1))
			return nil, added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		b.Fatal(err)
	}
	call := func(b *testing.B, opID string) *mcp.CallToolResult {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"text": "hello", "op_id": opID}})
		if err != nil || r.IsError {
			b.Fatalf("call: %v %v", err, r)
		}
		return r
	}
	perOp := func(b *testing.B, start int64) {
		b.ReportMetric(float64(ct.calls.Load()-start)/float64(b.N), "calls/op")
	}
	var ops atomic.Int64

	b.Run("wrapped", func(b *testing.B) {
		start := ct.calls.Load()
		for b.Loop() {
			call(b, fmt.Sprintf("op-%d", ops.Add(1)))
		}
		perOp(b, start)
	})

	b.Run("three-call", func(b *testing.B) {
		table := aws.String(s.Table())
		start := ct.calls.Load()
		for b.Loop() {
			i := ops.Add(1)
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
		perOp(b, start)
	})

	b.Run("replay", func(b *testing.B) {
		call(b, "op-replayed")
		start := ct.calls.Load()
		for b.Loop() {
			if r := call(b, "op-replayed"); r.Meta[idem.MetaReplayed] != true {
				b.Fatal("not replayed")
			}
		}
		perOp(b, start)
	})
}
