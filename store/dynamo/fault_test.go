package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	"github.com/idemkit/sdk/store/dynamo"
)

// The faults a faultTransport injects into the next TransactWriteItems.
const (
	faultNone     int32 = iota
	faultConflict       // answer 400 TransactionCanceledException [TransactionConflict], send nothing
	faultDrop           // send it, then lose the response
	faultLose           // lose it on the way (DynamoDB never sees it), then the connection
)

// faultTransport is the HTTP transport of a real client, which fails the
// next TransactWriteItems as armed and passes everything else through.
type faultTransport struct {
	next   http.RoundTripper
	armed  atomic.Int32
	writes atomic.Int32 // TransactWriteItems requests seen
}

const conflictBody = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",` +
	`"Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",` +
	`"CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}`

func (f *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") != "DynamoDB_20120810.TransactWriteItems" {
		return f.next.RoundTrip(r)
	}
	f.writes.Add(1)
	switch f.armed.Swap(faultNone) {
	case faultConflict:
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		return &http.Response{
			Status: "400 Bad Request", StatusCode: http.StatusBadRequest,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body:          io.NopCloser(strings.NewReader(conflictBody)),
			ContentLength: int64(len(conflictBody)),
			Request:       r,
		}, nil
	case faultDrop:
		resp, err := f.next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case faultLose:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return f.next.RoundTrip(r)
}

// faultStore returns a store whose client goes through a faultTransport and
// makes at most attempts tries of a request.
func faultStore(t *testing.T, attempts int) (*dynamo.Store, *faultTransport) {
	ft := &faultTransport{}
	c := newClient(t, attempts, func(rt http.RoundTripper) http.RoundTripper { ft.next = rt; return ft })
	return newStore(t, c, nil), ft
}

// TestTransactionConflictOnTheWire: DynamoDB cancelling a commit for a
// conflicting transaction makes Run call fn again, and the increment is
// applied once.
func TestTransactionConflictOnTheWire(t *testing.T) {
	s, ft := faultStore(t, 3)
	ctx := context.Background()
	k := idem.Key{Collection: "counters", ID: "c"}
	if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, 0) }); err != nil {
		t.Fatal(err)
	}
	ft.writes.Store(0)
	ft.armed.Store(faultConflict)
	runs := 0
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		runs++
		var n int
		v, err := tx.Get(ctx, k, &n)
		if err != nil {
			return err
		}
		return tx.Update(ctx, k, v, n+1)
	})
	if err != nil {
		t.Fatalf("Run after a TransactionConflict: %v", err)
	}
	var n int
	if _, err := s.Read(ctx, k, &n); err != nil || n != 1 {
		t.Fatalf("counter = %d (%v), want 1: applied once", n, err)
	}
	if runs != 2 || ft.writes.Load() != 2 {
		t.Fatalf("fn ran %d times with %d TransactWriteItems, want 2 and 2", runs, ft.writes.Load())
	}
}

// TestLostResponseIsUnknownOutcome: a TransactWriteItems that reached
// DynamoDB and whose response was lost is ErrUnknownOutcome, not an error
// Run retries; here it did commit.
func TestLostResponseIsUnknownOutcome(t *testing.T) {
	s, ft := faultStore(t, 1)
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "k"}
	ft.armed.Store(faultDrop)
	runs := 0
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		runs++
		return tx.Create(ctx, k, "landed")
	})
	if !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("Run with a lost response = %v, want ErrUnknownOutcome", err)
	}
	var se *net.OpError
	if !errors.As(err, &se) {
		t.Errorf("the error %v does not wrap the transport's", err)
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
	var got string
	if _, err := s.Read(ctx, k, &got); err != nil || got != "landed" {
		t.Fatalf("Read = %q, %v; the commit reached DynamoDB", got, err)
	}
}

// TestLostResponseThroughIdem: a tool call whose commit's response is lost.
// If the commit landed, the middleware's lookup finds the op record and the
// call gets its first answer; if it did not, the call answers
// unknown_outcome and the retry with the same op id runs once more. Either
// way one note is committed and a further repeat replays.
func TestLostResponseThroughIdem(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) { lostThroughIdem(t, landed) })
	}
}

func lostThroughIdem(t *testing.T, landed bool) {
	s, ft := faultStore(t, 1)
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	var runs atomic.Int32
	type note struct {
		Text string `json:"text"`
	}
	type added struct {
		ID string `json:"id"`
	}
	idem.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."}, s,
		func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in note) (*mcp.CallToolResult, added, error) {
			id := fmt.Sprintf("note-%d", runs.Add(1))
			return nil, added{ID: id}, tx.Create(ctx, idem.Key{Collection: "notes", ID: id}, in)
		}, idem.OpID())
	cs, err := idemtest.Connect(ctx, srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func() *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"text": "lost", "op_id": "op-lost"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if landed {
		ft.armed.Store(faultDrop)
	} else {
		ft.armed.Store(faultLose)
	}
	first := call()
	switch {
	case landed && first.IsError:
		t.Fatalf("first call: %v; the commit landed, want its answer", first.Meta)
	case !landed && first.Meta[idem.MetaError] != string(idem.CodeUnknownOutcome):
		t.Fatalf("first call: IsError=%v %v, want unknown_outcome", first.IsError, first.Meta)
	}
	again := call()
	if again.IsError || (again.Meta[idem.MetaReplayed] == true) != landed {
		t.Fatalf("retry: IsError=%v meta=%v, want replayed=%v", again.IsError, again.Meta, landed)
	}
	if r := call(); r.Meta[idem.MetaReplayed] != true {
		t.Fatalf("a further repeat: %v, want replayed", r.Meta)
	}
	notes := 0
	for i := int32(1); i <= runs.Load(); i++ {
		if _, err := s.Read(ctx, idem.Key{Collection: "notes", ID: fmt.Sprintf("note-%d", i)}, nil); err == nil {
			notes++
		}
	}
	if notes != 1 {
		t.Fatalf("%d notes committed (handler ran %d times), want 1", notes, runs.Load())
	}
}
