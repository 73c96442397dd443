package sideeffect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
	"github.com/idemkit/sdk/store/memory"
)

// A post that sent its request and then ran out of lease returns the
// context's error, as an HTTP client does. The request may have landed, so
// the marker becomes Unknown and nothing posts again until Recover hears
// from the target.
func TestPostCutShortByTheLeaseIsUnknown(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	fx := sideeffect.New(s, nil)
	if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, "post.1", map[string]string{"text": "hi"})
	}); err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int64
	slow := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		delivered.Add(1) // the request reached the target
		<-ctx.Done()     // the answer is slow; the lease ends
		return "", ctx.Err()
	}
	short := sideeffect.New(s, &sideeffect.Options{Lease: 30 * time.Millisecond})
	_, err := short.Once(ctx, "post.1", slow)
	if !errors.Is(err, sideeffect.ErrUnknown) {
		t.Fatalf("Once = %v, want ErrUnknown", err)
	}
	if m, _ := fx.Get(ctx, "post.1"); m.State != sideeffect.Unknown {
		t.Fatalf("marker %s, want unknown", m.State)
	}
	fast := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		delivered.Add(1)
		return "ref-2", nil
	}
	if _, err := fx.Once(ctx, "post.1", fast); !errors.Is(err, sideeffect.ErrUnknown) {
		t.Errorf("second Once = %v, want ErrUnknown without posting", err)
	}
	if delivered.Load() != 1 {
		t.Errorf("delivered %d times, want 1", delivered.Load())
	}
	// A post that fails on its own (the target refused it) is released.
	if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, "post.2", "x")
	}); err != nil {
		t.Fatal(err)
	}
	refused := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		return "", errors.New("400 bad request")
	}
	if _, err := fx.Once(ctx, "post.2", refused); err == nil || errors.Is(err, sideeffect.ErrUnknown) {
		t.Fatalf("refused post: %v", err)
	}
	if m, _ := fx.Get(ctx, "post.2"); m.State != sideeffect.Pending {
		t.Errorf("refused post left the marker %s, want pending", m.State)
	}
}

// A post that times out on its own deadline, inside the lease, as an HTTP
// client with a Timeout does, is unknown too.
func TestPostTimingOutOnItsOwnIsUnknown(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	fx := sideeffect.New(s, nil)
	for i, perr := range []error{
		fmt.Errorf("POST: %w", context.DeadlineExceeded),
		&url.Error{Op: "Post", URL: "http://127.0.0.1/x", Err: timeoutErr{}},
	} {
		key := fmt.Sprintf("post.t%d", i)
		if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
			return fx.Intend(ctx, tx, key, "x")
		}); err != nil {
			t.Fatal(err)
		}
		_, err := fx.Once(ctx, key, func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			return "", perr
		})
		if !errors.Is(err, sideeffect.ErrUnknown) {
			t.Errorf("%v: Once = %v, want ErrUnknown", perr, err)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
