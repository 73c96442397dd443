package firestore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	fs "cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/idemtest"
	idemfs "github.com/idemkit/sdk/store/firestore"
)

// The faults a faultConn injects into the next Commit.
const (
	faultNone     int32 = iota
	faultDrop           // send it, then answer Unavailable: the answer is lost with the connection
	faultDeadline       // send it, then answer DeadlineExceeded: the answer did not come in time
	faultCut            // as faultDrop, and from then on every read fails too, until restored
	faultLose           // answer Unavailable without sending it: lost on the way
	faultAbort          // answer Aborted without sending it, as a lost lock would
)

// faultConn is the gRPC connection of a real client on the emulator, which
// fails the next Commit as armed and passes everything else through.
type faultConn struct {
	armed     atomic.Int32
	commits   atomic.Int32 // Commit requests that reached the emulator
	readsDown atomic.Bool  // BatchGetDocuments fails with Unavailable
}

var errCut = status.Error(codes.Unavailable, "connection reset by peer")

func (f *faultConn) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer owner") // what the client sends the emulator
	if _, ok := req.(*firestorepb.CommitRequest); !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	fault := f.armed.Swap(faultNone)
	switch fault {
	case faultLose:
		return errCut
	case faultAbort:
		return status.Error(codes.Aborted, "Transaction lock timeout.")
	}
	f.commits.Add(1)
	err := invoker(ctx, method, req, reply, cc, opts...)
	switch fault {
	case faultDrop:
		return errCut
	case faultCut:
		f.readsDown.Store(true)
		return errCut
	case faultDeadline:
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	return err
}

func (f *faultConn) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer owner")
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !f.readsDown.Load() {
		return cs, err
	}
	return cutStream{cs}, nil
}

// cutStream is a read whose connection is reset before its answer arrives.
// (Failing the stream's creation instead would have the library retry it
// for as long as the context lasts.)
type cutStream struct{ grpc.ClientStream }

func (cutStream) RecvMsg(any) error { return errCut }

// faultClient returns a client on the emulator whose connection goes through
// a faultConn.
func faultClient(t *testing.T) (*fs.Client, *faultConn) {
	t.Helper()
	host := emulatorHost(t)
	newClient(t) // sets FIRESTORE_EMULATOR_HOST
	f := &faultConn{}
	conn, err := grpc.NewClient(host, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(f.unary), grpc.WithStreamInterceptor(f.stream))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fs.NewClient(context.Background(), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, f
}

// increment is a Run that adds 1 to the counter at k, counting its runs of
// fn: the write that a second run after an applied commit would apply twice.
func increment(ctx context.Context, s *idemfs.Store, k idem.Key, runs *int) error {
	return s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		*runs++
		var n int
		v, err := tx.Get(ctx, k, &n)
		if err != nil {
			return err
		}
		return tx.Update(ctx, k, v, n+1)
	})
}

// TestCommitFaultsOnTheWire: a commit whose answer is lost after it reached
// the emulator is ErrUnknownOutcome, and fn is not run again (here it did
// commit, so a second run would add 1 twice). A commit lost before it was
// sent is sent again by the client library and applied once; one the
// emulator aborts runs fn again.
func TestCommitFaultsOnTheWire(t *testing.T) {
	for _, c := range []struct {
		name      string
		fault     int32
		unknown   bool
		runs      int
		reachings int32 // Commit requests that reach the emulator
	}{
		// The library sends the commit again after Unavailable; the
		// emulator answers the second one InvalidArgument "Transaction is
		// invalid or closed", since the first committed it.
		{"AnswerLost", faultDrop, true, 1, 2},
		{"AnswerLate", faultDeadline, true, 1, 1},
		{"LostBeforeSending", faultLose, false, 1, 1},
		{"Aborted", faultAbort, false, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc, f := faultClient(t)
			s := newStoreOn(t, fc, nil)
			ctx := context.Background()
			k := idem.Key{Collection: "counters", ID: "c"}
			if err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error { return tx.Create(ctx, k, 0) }); err != nil {
				t.Fatal(err)
			}
			f.commits.Store(0)
			f.armed.Store(c.fault)
			runs := 0
			err := increment(ctx, s, k, &runs)
			if got := errors.Is(err, idem.ErrUnknownOutcome); got != c.unknown {
				t.Fatalf("Run = %v; ErrUnknownOutcome %v, want %v", err, got, c.unknown)
			}
			if !c.unknown && err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			if _, fromClient := status.FromError(err); c.unknown && !fromClient {
				t.Errorf("the error %v does not wrap the client's", err)
			}
			var n int
			if _, err := s.Read(ctx, k, &n); err != nil || n != 1 {
				t.Fatalf("counter = %d (%v), want 1: applied once", n, err)
			}
			if runs != c.runs || f.commits.Load() != c.reachings {
				t.Fatalf("fn ran %d times, %d commits reached the emulator; want %d and %d", runs, f.commits.Load(), c.runs, c.reachings)
			}
		})
	}
}

// TestClientCheckBeforeCommit: an error the client library raises itself
// before sending the commit (here a read after a write through the native
// transaction) is not ErrUnknownOutcome: nothing was sent, nothing written.
func TestClientCheckBeforeCommit(t *testing.T) {
	fc, f := faultClient(t)
	s := newStoreOn(t, fc, nil)
	ctx := context.Background()
	k := idem.Key{Collection: "docs", ID: "k"}
	err := s.Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		var ftx *fs.Transaction
		if !tx.As(&ftx) {
			t.Fatal("As(*fs.Transaction) = false")
		}
		if err := ftx.Set(s.Doc(idem.Key{Collection: "app", ID: "a"}), map[string]any{"n": 1}); err != nil {
			return err
		}
		ftx.Get(s.Doc(idem.Key{Collection: "app", ID: "b"})) // a read after a write; its error ignored
		return tx.Put(ctx, k, "v")
	})
	if err == nil || errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("Run = %v, want an error that is not ErrUnknownOutcome", err)
	}
	if f.commits.Load() != 0 {
		t.Fatalf("%d commits sent", f.commits.Load())
	}
	if _, err := s.Read(ctx, k, nil); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Read = %v, want ErrNotFound: nothing written", err)
	}
}

// TestCommitFaultsThroughIdem: a tool call whose commit is lost, through the
// middleware on the wire. When the answer is lost and the op record can be
// read, the call gets its own answer; when reads fail too, the call answers
// unknown_outcome and, the connection back, the retry with the same op id
// replays. A commit lost before it was sent is sent again by the library.
// In every case the handler runs once, its note is committed and the retry
// replays.
func TestCommitFaultsThroughIdem(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   int32
		unknown bool // the first call answers unknown_outcome
	}{
		{"AnswerLost", faultDrop, false},
		{"AnswerLostReadsFail", faultCut, true},
		{"LostBeforeSending", faultLose, false},
	} {
		t.Run(c.name, func(t *testing.T) { faultThroughIdem(t, c.fault, c.unknown) })
	}
}

func faultThroughIdem(t *testing.T, fault int32, unknown bool) {
	fc, f := faultClient(t)
	s := newStoreOn(t, fc, nil)
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
	f.armed.Store(fault)
	first := call()
	f.readsDown.Store(false)
	switch {
	case unknown && first.Meta[idem.MetaError] != string(idem.CodeUnknownOutcome):
		t.Fatalf("first call: IsError=%v %v, want unknown_outcome", first.IsError, first.Meta)
	case !unknown && (first.IsError || first.Meta[idem.MetaReplayed] == true):
		t.Fatalf("first call: IsError=%v %v; the commit landed, want its own answer", first.IsError, first.Meta)
	}
	again := call()
	if again.IsError || again.Meta[idem.MetaReplayed] != true {
		t.Fatalf("retry: IsError=%v meta=%v, want a replay", again.IsError, again.Meta)
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
	if _, err := s.Read(ctx, idem.Key{Collection: "notes", ID: "note-1"}, nil); err != nil {
		t.Fatalf("note-1: %v, want committed", err)
	}
}
