package sideeffect_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
	"github.com/idemkit/sdk/store/memory"
)

type fenceClock struct{ n atomic.Int64 }

func (c *fenceClock) now() time.Time { return time.Unix(0, c.n.Load()) }

// A's lease expires, Recover (B) takes over and is still posting when A's
// post fails: A's release must be fenced out while B holds the claim.
func TestReleaseFencedWhileNewOwnerPosts(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	var clk fenceClock
	clk.n.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	fx := sideeffect.New(s, &sideeffect.Options{Clock: clk.now, Lease: time.Minute})
	if err := idem.New(s, nil).Run(ctx, func(ctx context.Context, tx idem.Tx) error {
		return fx.Intend(ctx, tx, "k", "p")
	}); err != nil {
		t.Fatal(err)
	}
	aStarted, aFinish := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		_, err := fx.Once(ctx, "k", func(ctx context.Context, key string, p json.RawMessage) (string, error) {
			close(aStarted)
			<-aFinish
			return "", errors.New("A failed")
		})
		aDone <- err
	}()
	<-aStarted
	clk.n.Add(int64(2 * time.Minute))
	bPosting, bFinish := make(chan struct{}), make(chan struct{})
	go fx.Recover(ctx, func(ctx context.Context, key string, p json.RawMessage) (string, error) {
		close(bPosting)
		<-bFinish
		return "ref-B", nil
	}, func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		return sideeffect.NotHappened, "", nil
	})
	<-bPosting
	close(aFinish)
	aErr := <-aDone
	m, _ := fx.Get(ctx, "k")
	close(bFinish)
	t.Logf("A: %v; marker while B posts: %s", aErr, m.State)
	if !errors.Is(aErr, sideeffect.ErrFenced) || m.State != sideeffect.Claimed {
		t.Errorf("A's late release was not fenced: err %v, state %s (another caller may now post again)", aErr, m.State)
	}
}
