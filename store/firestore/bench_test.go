package firestore_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
)

type benchNote struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// BenchmarkOpRecord compares, on one emulator in one run, a handler's write
// (a Put of one document) in a bare store transaction with the same write
// wrapped by idem.Tool with an op id, on a first call and on its replay. The
// wrapped handler is called directly, without an MCP transport, so the
// figures are the middleware's and the store's own cost. The three are
// interleaved in every iteration so that drift hits them alike. On the
// emulator the figures are indicative only.
func BenchmarkOpRecord(b *testing.B) {
	s := newStore(b, nil)
	ctx := context.Background()
	put := func(ctx context.Context, tx idem.Tx, n benchNote) error {
		return tx.Put(ctx, idem.Key{Owner: "uid-1", Collection: "notes", ID: n.ID}, n)
	}
	bare := func(id string) {
		if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return put(ctx, tx, benchNote{ID: id, Text: "hello"})
		}); err != nil {
			b.Fatal(err)
		}
	}
	guard := idem.New(s, &idem.Options{Scope: func(context.Context, *mcp.CallToolRequest) string { return "uid-1" }})
	_, handle := idem.Tool(&mcp.Tool{Name: "add_note", Description: "Add a note."}, guard,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in benchNote) (*mcp.CallToolResult, benchNote, error) {
			return nil, in, put(ctx, tx, in)
		},
		idem.RequireOpID())
	wrapped := func(id string) bool {
		res, err := handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "add_note",
			Arguments: json.RawMessage(`{"id":"` + id + `","text":"hello","op_id":"op-` + id + `"}`)}})
		if err != nil || res.IsError {
			b.Fatalf("wrapped call: %v %v", err, res)
		}
		return res.Meta[idem.MetaReplayed] == true
	}
	// Warm the client's connections.
	for i := range 10 {
		id := "warm-" + strconv.Itoa(i)
		bare("bare-" + id)
		wrapped(id)
		wrapped(id)
	}
	var tBare, tFirst, tReplay time.Duration
	n := 0
	for b.Loop() {
		id := strconv.Itoa(n)
		n++
		t0 := time.Now()
		bare("bare-" + id)
		t1 := time.Now()
		if wrapped(id) {
			b.Fatal("first call replayed")
		}
		t2 := time.Now()
		if !wrapped(id) {
			b.Fatal("repeat not replayed")
		}
		t3 := time.Now()
		tBare += t1.Sub(t0)
		tFirst += t2.Sub(t1)
		tReplay += t3.Sub(t2)
	}
	b.ReportMetric(float64(tBare.Nanoseconds())/float64(n), "bare-ns/op")
	b.ReportMetric(float64(tFirst.Nanoseconds())/float64(n), "first-ns/op")
	b.ReportMetric(float64(tReplay.Nanoseconds())/float64(n), "replay-ns/op")
	b.ReportMetric(float64(tFirst)/float64(tBare), "first/bare")
	b.ReportMetric(float64(tReplay)/float64(tFirst), "replay/first")
}
