package sideeffect_test

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/sideeffect"
)

// hookStore calls after once the n-th Run (counting from 1) has returned.
type hookStore struct {
	idem.Store
	runs  atomic.Int64
	n     int64
	after func()
}

func (s *hookStore) Run(ctx context.Context, fn func(ctx context.Context, tx idem.Tx) error) error {
	err := s.Store.Run(ctx, fn)
	if s.runs.Add(1) == s.n && s.after != nil {
		s.after()
	}
	return err
}

// abandon claims key with Once and lets the claiming goroutine die inside
// the post, so the claim is never completed or released.
func abandon(t *testing.T, fx *sideeffect.Effects, key string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fx.Once(context.Background(), key, func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
			runtime.Goexit()
			return "", nil
		})
	}()
	<-done
	if m := get(t, fx, key); m.State != sideeffect.Claimed {
		t.Fatalf("after the owner died: %s, want claimed", m.State)
	}
}

// The post's deadline comes from the stored LeaseUntil on the same clock,
// not from a lease started when the claim's commit returned: a commit that
// took long (retries, backoff) leaves the post only what is left of the
// lease, less the margin.
func TestPostDeadlineIsTheStoredLease(t *testing.T) {
	mem, clk, memfx := newStore(t)
	intend(t, mem, memfx, "k", "p")
	// The claim's commit returns 40 s after the claim read the clock.
	s := &hookStore{Store: mem, n: 1, after: func() { clk.Advance(40 * time.Second) }}
	fx := effects(s, clk, sideeffect.Options{})
	post := func(ctx context.Context, key string, payload json.RawMessage) (string, error) {
		m := get(t, memfx, "k")
		// Lease 1 min, margin 6 s: the post must end by LeaseUntil-6s.
		want := m.LeaseUntil.Add(-6 * time.Second).Sub(clk.Now())
		if want != 14*time.Second {
			t.Errorf("lease left %v, want 14s", want)
		}
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > want {
			t.Errorf("post deadline in %v (set %v), want within %v, before the stored lease ends", time.Until(dl), ok, want)
		}
		return "r", nil
	}
	if ref, err := fx.Once(context.Background(), "k", post); err != nil || ref != "r" {
		t.Fatalf("Once = %q, %v; want r", ref, err)
	}
}

// A claim whose commit returned after (nearly) the whole lease does not
// post: another node may take it over at any moment. The marker is released
// for a later attempt.
func TestClaimWithNoLeaseLeftDoesNotPost(t *testing.T) {
	mem, clk, memfx := newStore(t)
	intend(t, mem, memfx, "k", "p")
	s := &hookStore{Store: mem, n: 1, after: func() { clk.Advance(55 * time.Second) }}
	fx := effects(s, clk, sideeffect.Options{})
	if _, err := fx.Once(context.Background(), "k", mustNotPost(t)); err == nil {
		t.Fatal("Once with no lease left returned no error")
	}
	if m := get(t, memfx, "k"); m.State != sideeffect.Pending || m.Failures != 0 {
		t.Errorf("marker %s failures %d, want pending 0", m.State, m.Failures)
	}
	var p counter
	if ref, err := memfx.Once(context.Background(), "k", p.post); err != nil || ref != "ref-1" {
		t.Errorf("next Once = %q, %v; want ref-1", ref, err)
	}
}

// Recover takes a claim as abandoned only a grace period (a tenth of the
// lease) after its LeaseUntil, so a post still running near its deadline on
// a slightly different clock is not posted again.
func TestRecoverWaitsForTheGraceAfterTheLease(t *testing.T) {
	s, clk, fx := newStore(t)
	intend(t, s, fx, "k", "p")
	abandon(t, fx, "k")
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		t.Errorf("reconcile asked about a claim within its grace")
		return sideeffect.NotHappened, "", nil
	}
	clk.Advance(time.Minute + time.Second) // past LeaseUntil, within the grace
	if m := get(t, fx, "k"); m.State != sideeffect.Claimed {
		t.Errorf("within the grace: %s, want claimed", m.State)
	}
	r, err := fx.Recover(context.Background(), mustNotPost(t), noReconcile)
	if err != nil || len(r.Busy) != 1 {
		t.Fatalf("Recover within the grace = %+v, %v; want the claim busy", r, err)
	}
	clk.Advance(5 * time.Second) // 6 s after LeaseUntil: expired
	if m := get(t, fx, "k"); m.State != sideeffect.Unknown {
		t.Errorf("after the grace: %s, want unknown", m.State)
	}
}

// Recover acts on the marker as its claim transaction saw it, at the time
// that transaction read: a claim live then is left alone, even if the clock
// has passed its expiry by the time Recover looks again.
func TestRecoverUsesTheClaimsOwnTime(t *testing.T) {
	mem, clk, memfx := newStore(t)
	intend(t, mem, memfx, "k", "p")
	abandon(t, memfx, "k")
	// Claim at epoch, lease 1 min, grace 6 s: live until epoch+66s.
	clk.Advance(65 * time.Second)
	// Recover runs: index heads, index pages, markers, then the claim
	// transaction (the 4th), after which the clock passes the expiry.
	var flipped atomic.Bool
	s := &hookStore{Store: mem, n: 4, after: func() { flipped.Store(true); clk.Advance(2 * time.Second) }}
	fx := effects(s, clk, sideeffect.Options{})
	noReconcile := func(ctx context.Context, m sideeffect.Marker) (sideeffect.Outcome, string, error) {
		t.Errorf("reconcile asked about marker %s, seen live by the claim transaction", m.State)
		return sideeffect.CannotTell, "", nil
	}
	r, err := fx.Recover(context.Background(), mustNotPost(t), noReconcile)
	if err != nil || len(r.Busy) != 1 {
		t.Errorf("Recover = %+v, %v; want the claim busy", r, err)
	}
	if !flipped.Load() {
		t.Fatal("the clock did not move after the claim transaction; the test no longer matches Recover's transactions")
	}
	if got := s.runs.Load(); got != 4 {
		t.Errorf("Recover ran %d transactions, want 4", got)
	}
}
